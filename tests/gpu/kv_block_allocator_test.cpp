#include "gpu/kv/block_allocator.hpp"

#include <catch2/catch.hpp>

using pensieve::kv::BlockAllocator;
using pensieve::kv::BlockId;

namespace {
std::vector<std::uint32_t> ids(const std::vector<BlockId>& v) {
  std::vector<std::uint32_t> out;
  for (auto b : v) out.push_back(b.value);
  return out;
}
}  // namespace

TEST_CASE("blocks are handed out in free-list order and freed ones go to its back", "[kv]") {
  BlockAllocator a(4);
  CHECK(a.allocate()->value == 0);
  CHECK(a.allocate()->value == 1);
  CHECK(a.release(BlockId{0}));
  CHECK(ids(a.free_list()) == std::vector<std::uint32_t>{2, 3, 0});
  CHECK(ids(*a.allocate_n(3)) == std::vector<std::uint32_t>{2, 3, 0});
  CHECK(a.free_blocks() == 0);
  CHECK(a.used_blocks() == 4);
  CHECK_FALSE(a.allocate().has_value());
}

TEST_CASE("a shared block is freed only by its last sharer", "[kv]") {
  BlockAllocator a(2);
  const BlockId b = *a.allocate();
  a.retain(b);
  CHECK(a.ref_count(b) == 2);
  CHECK(a.is_shared(b));
  CHECK_FALSE(a.release(b));
  CHECK(a.free_blocks() == 1);
  CHECK(a.release(b));
  CHECK(a.free_blocks() == 2);
  CHECK(ids(a.free_list()) == std::vector<std::uint32_t>{1, 0});
}

TEST_CASE("allocating more blocks than are free takes none", "[kv]") {
  BlockAllocator a(3);
  CHECK_FALSE(a.allocate_n(4).has_value());
  CHECK(a.free_blocks() == 3);
  CHECK(ids(a.free_list()) == std::vector<std::uint32_t>{0, 1, 2});
}

TEST_CASE("releasing a free block is a fault", "[kv]") {
  BlockAllocator a(2);
  const BlockId b = *a.allocate();
  a.release(b);
  CHECK_THROWS_AS(a.release(b), std::logic_error);
  CHECK_THROWS_AS(a.retain(BlockId{1}), std::logic_error);
}

TEST_CASE("the free hook sees each block whose last reference went", "[kv]") {
  BlockAllocator a(3);
  std::vector<BlockId> freed;
  a.set_free_hook([&](BlockId id) { freed.push_back(id); });
  const auto blocks = *a.allocate_n(2);
  a.retain(blocks[1]);
  a.release(blocks[1]);
  a.release(blocks[0]);
  CHECK(ids(freed) == std::vector<std::uint32_t>{0});
}
