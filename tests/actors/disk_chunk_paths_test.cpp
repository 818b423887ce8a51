// Putting the disk tier's chunks back into cached paths at start-up: whole
// prefixes from their first block, shared leading blocks shared, and
// chunks that do not fit their label (a missing prefix, a wrong chain key,
// a duplicate) left unused.
#include "actors/disk_chunk_paths.hpp"

#include "actors/kv_cache_index.hpp"
#include "actors/prefix_chain.hpp"

#include <catch2/catch.hpp>

using namespace pensieve;
using namespace pensieve::actors;
using kv::DiskSlot;

namespace {

constexpr std::int32_t bt = 2;

// Chunk `index` of the path with `tokens` in `ns`, in `slot`.
DiskChunk chunk(std::uint32_t slot, const std::string& ns, const std::vector<std::int32_t>& tokens,
                std::uint32_t index) {
  std::uint64_t parent = chain_seed(ns);
  for (std::uint32_t b = 0; b < index; ++b) parent = chain_step(parent, std::span(tokens).subspan(b * bt, bt));
  const auto begin = tokens.begin() + index * bt;
  const auto end = tokens.begin() + std::min<std::size_t>(tokens.size(), (index + 1) * bt);
  std::vector<std::int32_t> mine(begin, end);
  const std::uint64_t chain = mine.size() == std::size_t(bt) ? chain_step(parent, mine) : 0;
  return DiskChunk{DiskSlot{slot}, kv::ChunkLabel{ns, index, parent, chain}, mine};
}

std::vector<std::uint32_t> values(const std::vector<DiskSlot>& slots) {
  std::vector<std::uint32_t> out;
  for (DiskSlot s : slots) out.push_back(s.value);
  return out;
}

}  // namespace

TEST_CASE("two paths sharing a first block come back as two paths sharing its slot, a partial last block "
          "included",
          "[kv][disk]") {
  const std::vector<std::int32_t> a{1, 2, 3, 4, 5}, b{1, 2, 7, 8};
  const RestoredKv r = restore_paths({chunk(4, "t", a, 2), chunk(9, "t", b, 1), chunk(2, "t", a, 0),
                                      chunk(3, "t", a, 1)},
                                     bt);
  REQUIRE(r.paths.size() == 2);
  CHECK(r.paths[0].tokens == a);  // its last chunk is in slot 4, before slot 9
  CHECK(values(r.paths[0].slots) == std::vector<std::uint32_t>{2, 3, 4});
  CHECK(r.paths[0].chunk_tokens.back() == std::vector<std::int32_t>{5});
  CHECK(r.paths[1].tokens == b);
  CHECK(values(r.paths[1].slots) == std::vector<std::uint32_t>{2, 9});
  CHECK(values(r.used) == std::vector<std::uint32_t>{2, 3, 4, 9});
  CHECK(r.unused.empty());
}

TEST_CASE("a chunk whose prefix is gone, whose chain key does not fit its tokens, of another namespace's "
          "chain, or a duplicate, is unused",
          "[kv][disk]") {
  const std::vector<std::int32_t> a{1, 2, 3, 4, 5, 6};
  DiskChunk forged = chunk(5, "t", a, 1);
  forged.tokens[0] = 99;  // the key no longer fits
  DiskChunk elsewhere = chunk(6, "u", a, 1);
  elsewhere.label.parent_chain = chunk(1, "t", a, 1).label.parent_chain;  // another namespace's parent
  const RestoredKv r = restore_paths({chunk(1, "t", a, 0), chunk(7, "t", a, 0), chunk(3, "t", a, 2), forged,
                                      elsewhere, chunk(8, "", a, 0)},
                                     bt);
  REQUIRE(r.paths.size() == 1);
  CHECK(r.paths[0].tokens == std::vector<std::int32_t>{1, 2});
  CHECK(values(r.paths[0].slots) == std::vector<std::uint32_t>{1});
  CHECK(values(r.unused) == std::vector<std::uint32_t>{3, 5, 6, 7, 8});
}

TEST_CASE("the chain keys a chunk is labelled with are the prefix index's own", "[kv][disk]") {
  KvCacheIndex index(bt);
  CachedEntry e;
  e.tokens = {1, 2, 3, 4, 5};
  e.shared = "t";
  const CachedEntry& in = index.insert(ConversationId{1}, e);
  REQUIRE(in.chain.size() == 2);
  CHECK(in.chain[0] == chunk(0, "t", e.tokens, 0).label.chain);
  CHECK(in.chain[1] == chunk(0, "t", e.tokens, 1).label.chain);
  CHECK(chunk(0, "t", e.tokens, 2).label.parent_chain == in.chain[1]);
}
