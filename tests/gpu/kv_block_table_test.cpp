#include "gpu/kv/block_table.hpp"
#include "gpu/kv/kv_accounting.hpp"

#include <catch2/catch.hpp>

using namespace pensieve::kv;

namespace {
std::vector<std::uint32_t> ids(std::span<const BlockId> v) {
  std::vector<std::uint32_t> out;
  for (auto b : v) out.push_back(b.value);
  return out;
}
}  // namespace

TEST_CASE("appending tokens allocates blocks only at block boundaries", "[kv]") {
  BlockAllocator a(8);
  BlockTable t(4);
  CHECK(t.append(3, a)->new_blocks == 1);
  CHECK(t.append(1, a)->new_blocks == 0);
  CHECK(t.append(5, a)->new_blocks == 2);
  CHECK(ids(t.blocks()) == std::vector<std::uint32_t>{0, 1, 2});
  CHECK(t.num_tokens() == 9);
  CHECK(t.unused_slots() == 3);
  CHECK(t.slot(0) == 0);
  CHECK(t.slot(5) == 1 * 4 + 1);
  CHECK(t.slot(8) == 2 * 4 + 0);
}

TEST_CASE("slots follow the physical blocks, not the logical order", "[kv]") {
  BlockAllocator a(4);
  auto hole = *a.allocate();  // block 0 taken by someone else
  BlockTable t(2);
  t.append(3, a);
  CHECK(ids(t.blocks()) == std::vector<std::uint32_t>{1, 2});
  a.release(hole);
  t.append(2, a);
  CHECK(ids(t.blocks()) == std::vector<std::uint32_t>{1, 2, 3});
  t.append(2, a);
  CHECK(ids(t.blocks()) == std::vector<std::uint32_t>{1, 2, 3, 0});
  CHECK(t.slot(6) == 0 * 2 + 0);
}

TEST_CASE("the first divergent token of a shared partly filled block copies it", "[kv]") {
  BlockAllocator a(8);
  BlockTable parent(4);
  parent.append(6, a);  // blocks 0 (full) and 1 (2 of 4 tokens)
  BlockTable child = parent.fork(a);
  CHECK(a.ref_count(BlockId{1}) == 2);
  const auto r = child.append(1, a);
  REQUIRE(r->copy.has_value());
  CHECK(*r->copy == CopyOnWrite{BlockId{1}, BlockId{2}, 2});
  CHECK(r->new_blocks == 1);
  CHECK(ids(child.blocks()) == std::vector<std::uint32_t>{0, 2});
  CHECK(a.ref_count(BlockId{0}) == 2);  // the full block stays shared
  CHECK(a.ref_count(BlockId{1}) == 1);
  // The parent's block is now its own: it writes in place.
  CHECK_FALSE(parent.append(1, a)->copy.has_value());
  CHECK(ids(parent.blocks()) == std::vector<std::uint32_t>{0, 1});
}

TEST_CASE("a shared prefix that ends on a block boundary is never copied", "[kv]") {
  BlockAllocator a(8);
  BlockTable parent(4);
  parent.append(8, a);
  BlockTable child = parent.fork(a);
  const auto r = child.append(3, a);
  CHECK_FALSE(r->copy.has_value());
  CHECK(ids(child.blocks()) == std::vector<std::uint32_t>{0, 1, 2});
}

TEST_CASE("an append the pool cannot hold changes nothing", "[kv]") {
  BlockAllocator a(3);
  BlockTable parent(4);
  parent.append(6, a);
  BlockTable child = parent.fork(a);
  CHECK(child.blocks_needed(5, a) == 2);  // the copy and one more block
  CHECK_FALSE(child.append(7, a).has_value());
  CHECK(child.num_tokens() == 6);
  CHECK(ids(child.blocks()) == std::vector<std::uint32_t>{0, 1});
  CHECK(a.free_blocks() == 1);
}

TEST_CASE("releasing a table frees exactly the blocks nobody else holds", "[kv]") {
  BlockAllocator a(8);
  BlockTable parent(4);
  parent.append(10, a);
  BlockTable child = parent.fork(a);
  child.append(4, a);  // copies block 2 into 3, then takes 4
  CHECK(ids(child.release(a)) == std::vector<std::uint32_t>{4, 3});
  CHECK(child.num_tokens() == 0);
  CHECK(ids(parent.truncate(5, a)) == std::vector<std::uint32_t>{2});
  CHECK(ids(a.free_list()) == std::vector<std::uint32_t>{5, 6, 7, 4, 3, 2});
}

TEST_CASE("each sequence wastes at most one partly filled block", "[kv]") {
  BlockAllocator a(64);
  std::vector<BlockTable> tables;
  for (std::int64_t n : {1, 16, 17, 31, 40}) {
    tables.emplace_back(16);
    tables.back().append(n, a);
  }
  std::vector<const BlockTable*> live;
  for (auto& t : tables) live.push_back(&t);
  const auto r = kv_memory_report(a, live, 16, 100);
  CHECK(r.used_blocks == 1 + 1 + 2 + 2 + 3);
  CHECK(r.free_blocks == 64 - 9);
  CHECK(r.referenced_tokens == 105);
  CHECK(r.unused_slots == 15 + 0 + 15 + 1 + 8);
  CHECK(r.block_bytes == 1600);
  CHECK(r.used_bytes() == 9 * 1600);
  CHECK(r.fragmentation() == Approx(39.0 / (9 * 16)));
  for (auto& t : tables) CHECK(t.unused_slots() < 16);
}
