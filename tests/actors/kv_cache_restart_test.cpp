// The KV cache at a restart: the previous run's disk chunks become
// restored, disk-only paths of their namespaces (their slots taken); a
// stateless prompt finds them in the one prefix index; a conversation's
// turn takes one over and its chunks are restored from disk, unless the
// disk-vs-recompute rule says the prefill is faster.
#include "actors/disk_restore_rule.hpp"
#include "actors/kv_cache_manager.hpp"
#include "actors/prefix_chain.hpp"

#include <catch2/catch.hpp>

using namespace pensieve;
using namespace pensieve::actors;
using kv::DiskSlot;

namespace {

constexpr std::int32_t bt = 2;

// The chunks of `tokens` in `ns`, chunk i in slot first_slot + i, as a scan finds them.
std::vector<DiskChunk> chunks_of(const std::string& ns, const std::vector<std::int32_t>& tokens,
                                 std::uint32_t first_slot) {
  std::vector<DiskChunk> out;
  std::uint64_t parent = chain_seed(ns);
  for (std::size_t b = 0; b * bt < tokens.size(); ++b) {
    std::vector<std::int32_t> mine(tokens.begin() + std::ptrdiff_t(b * bt),
                                   tokens.begin() + std::ptrdiff_t(std::min(tokens.size(), (b + 1) * bt)));
    const std::uint64_t chain = mine.size() == std::size_t(bt) ? chain_step(parent, mine) : 0;
    out.push_back({DiskSlot{first_slot + std::uint32_t(b)}, kv::ChunkLabel{ns, std::uint32_t(b), parent, chain}, mine});
    parent = chain;
  }
  return out;
}

KvCacheManager restarted(KvCacheOptions o = {}) {
  o.swap_out_watermark = 0.0;
  KvCacheManager kv({.num_blocks = 8, .block_tokens = bt, .host_slots = 4, .disk_slots = 8}, o);
  kv.restore_disk_paths(restore_paths(chunks_of("t", {1, 2, 3, 4, 5}, 2), bt));
  return kv;
}

const ConversationId first_path{KvCacheManager::restored_path_ids};

}  // namespace

TEST_CASE("a previous run's disk chunks come back as a restored, disk-only path whose slots are taken",
          "[kv_cache][disk]") {
  KvCacheManager kv = restarted();
  CHECK(kv.size() == 1);
  CHECK(kv.tokens(first_path) == std::vector<std::int32_t>{1, 2, 3, 4, 5});
  const auto chunks = kv.chunks(first_path);
  REQUIRE(chunks.size() == 3);
  for (std::uint32_t i = 0; i < 3; ++i) {
    CHECK(chunks[i].tier == ChunkTier::disk);
    CHECK(chunks[i].disk == DiskSlot{2 + i});
  }
  const TierStats s = kv.stats();
  CHECK(s.free_disk_slots == 5);
  CHECK(s.found_disk_paths == 1);
  CHECK(s.found_disk_chunks == 3);
  // A stateless prompt of its namespace finds it; another namespace's does not.
  const std::vector<std::int32_t> want{1, 2, 3, 4, 9, 9};
  const auto match = kv.find_prefix("t", want, true, std::nullopt);
  REQUIRE(match.has_value());
  CHECK(match->path == first_path);
  CHECK(match->restored);
  CHECK(match->tokens == 4);
  CHECK_FALSE(kv.find_prefix("u", want, true, std::nullopt).has_value());
}

TEST_CASE("a conversation's turn takes a restored path over and its chunks are read back from disk",
          "[kv_cache][disk]") {
  KvCacheManager kv = restarted();
  const ConversationId c{7};
  REQUIRE(kv.adopt_restored(first_path, c));
  CHECK_FALSE(kv.adopt_restored(first_path, ConversationId{8}));  // gone
  CHECK(kv.cached_token_count(c) == 5);
  // Now the conversation's path: found under its id by another conversation's lookup, no longer restored.
  const auto found = kv.find_prefix("t", std::vector<std::int32_t>{1, 2, 3, 4, 9}, false, ConversationId{8});
  REQUIRE(found.has_value());
  CHECK(found->path == c);
  CHECK_FALSE(found->restored);
  CHECK_FALSE(found->unnamed);
  KvTransfers out;
  std::vector<kv::BlockId> freed;
  const std::vector<std::int32_t> want{1, 2, 3, 4, 5, 6, 7};
  REQUIRE(kv.attach(c, TurnId{1}, want, 10, out, freed));
  REQUIRE(out.restore.size() == 3);
  CHECK(out.restore[0].disk == DiskSlot{2});
  CHECK(out.restore[2].tokens == std::vector<std::int32_t>{5});
  TransfersDone done;
  done.restored = out.restore;
  done.restore_wall_ns = 3'000'000;
  kv.transfers_done(done, freed);
  CHECK(kv.ready(c));
  const AttachedKv got = kv.materialize(c, freed);
  CHECK(got.hit_tokens == 5);
  CHECK(got.swap_in.size() == 3);
  CHECK(kv.stats().hit_tokens_disk == 5);
  CHECK(kv.stats().disk_read_s_per_chunk == Approx(1e-3));
}

TEST_CASE("two restored paths sharing a first chunk share its disk slot until both let it go", "[kv_cache][disk]") {
  KvCacheManager kv({.num_blocks = 8, .block_tokens = bt, .host_slots = 4, .disk_slots = 8}, {});
  auto found = chunks_of("t", {1, 2, 3, 4}, 2);             // slots 2, 3
  for (DiskChunk& c : chunks_of("t", {1, 2, 7, 8}, 6)) found.push_back(c);  // slots 6 (a duplicate of 2), 7
  kv.restore_disk_paths(restore_paths(found, bt));
  CHECK(kv.size() == 2);
  CHECK(kv.stats().found_disk_chunks == 3);
  CHECK(kv.stats().free_disk_slots == 5);
  const ConversationId second{KvCacheManager::restored_path_ids + 1};
  CHECK(kv.tokens(second) == std::vector<std::int32_t>{1, 2, 7, 8});
  std::vector<kv::BlockId> freed;
  kv.forget(first_path, freed);
  CHECK(kv.stats().free_disk_slots == 6);  // slot 3; slot 2 is still the second path's
  REQUIRE(kv.chunks(second).size() == 2);
  CHECK(kv.chunks(second)[0].disk == DiskSlot{2});
  kv.forget(second, freed);
  CHECK(kv.stats().free_disk_slots == 8);
}

TEST_CASE("chunks are recomputed instead of read when the measured read is slower than their prefill",
          "[kv_cache][disk]") {
  DiskReadMeter meter;
  CostModel seconds;
  seconds.per_token = 1e-4;  // 2 tokens of a chunk: 0.2 ms plus attention
  seconds.per_token_pair = 0.0;
  // Nothing measured yet, or a cost model in relative units: read.
  CHECK(read_from_disk(DiskRestoreMode::rule, meter, seconds, true, 0, 2));
  meter.observe(4, 4'000'000);  // 1 ms a chunk
  CHECK(meter.seconds_per_chunk() == Approx(1e-3));
  CHECK_FALSE(read_from_disk(DiskRestoreMode::rule, meter, seconds, true, 0, 2));
  CHECK(read_from_disk(DiskRestoreMode::rule, meter, seconds, false, 0, 2));
  CHECK(read_from_disk(DiskRestoreMode::read, meter, seconds, true, 0, 2));
  seconds.per_token = 1e-3;  // a slow prefill: 2 ms a chunk
  CHECK(read_from_disk(DiskRestoreMode::rule, meter, seconds, true, 0, 2));
  CHECK_FALSE(read_from_disk(DiskRestoreMode::recompute, meter, seconds, true, 0, 2));
  meter.observe(1, 5'000'000);  // a quarter of the way to 5 ms
  CHECK(meter.seconds_per_chunk() == Approx(0.75e-3 + 1.25e-3));

  // Through the cache: with recompute, a returning turn's disk chunks become holes.
  KvCacheOptions o;
  o.disk_restore = DiskRestoreMode::recompute;
  KvCacheManager kv = restarted(o);
  REQUIRE(kv.adopt_restored(first_path, ConversationId{7}));
  KvTransfers out;
  std::vector<kv::BlockId> freed;
  CHECK(kv.attach(ConversationId{7}, TurnId{1}, std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}, 10, out, freed));
  CHECK(out.restore.empty());
  CHECK(kv.stats().restores_recomputed == 3);
  CHECK(kv.stats().free_disk_slots == 8);
}

TEST_CASE("a disk path whose first chunk is lost is placed when a history knows its tokens",
          "[kv_cache][disk]") {
  auto found = chunks_of("t", {1, 2, 3, 4, 5, 6}, 2);  // slots 2, 3, 4
  found.erase(found.begin());                            // slot 2's chunk is lost
  const RestoredKv alone = restore_paths(found, bt);
  CHECK(alone.paths.empty());
  CHECK(alone.unused == std::vector<DiskSlot>{DiskSlot{3}, DiskSlot{4}});
  // Another namespace's history, or one that differs in the lost chunk, does not place it.
  CHECK(restore_paths(found, bt, {{"u", {1, 2, 3, 4, 5, 6}}}).paths.empty());
  CHECK(restore_paths(found, bt, {{"t", {1, 9, 3, 4, 5, 6}}}).paths.empty());
  RestoredKv placed = restore_paths(found, bt, {{"t", {1, 2, 3, 4, 5, 6, 7}}});
  REQUIRE(placed.paths.size() == 1);
  const RestoredPath& p = placed.paths[0];
  CHECK(p.missing_front == 1);
  CHECK(p.tokens == std::vector<std::int32_t>{1, 2, 3, 4, 5, 6});
  CHECK(p.slots == std::vector<DiskSlot>{DiskSlot{3}, DiskSlot{4}});
  CHECK(placed.unused.empty());

  KvCacheManager kv({.num_blocks = 8, .block_tokens = bt, .host_slots = 4, .disk_slots = 8}, {});
  kv.restore_disk_paths(placed);
  CHECK(kv.stats().found_disk_front_missing == 1);
  CHECK(kv.stats().found_disk_chunks == 2);
  const auto chunks = kv.chunks(first_path);
  REQUIRE(chunks.size() == 3);
  CHECK(chunks[0].tier == ChunkTier::dropped);
  CHECK(chunks[1].tier == ChunkTier::disk);
  // A conversation takes it over: its front is a hole to recompute, the rest comes from disk.
  const ConversationId c{7};
  REQUIRE(kv.adopt_restored(first_path, c));
  KvTransfers out;
  std::vector<kv::BlockId> freed;
  const std::vector<std::int32_t> want{1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE(kv.attach(c, TurnId{1}, want, 10, out, freed));
  REQUIRE(out.restore.size() == 2);
  CHECK(out.restore[0].disk == DiskSlot{3});
  TransfersDone done;
  done.restored = out.restore;
  kv.transfers_done(done, freed);
  const AttachedKv got = kv.materialize(c, freed);
  CHECK(got.computed == 6);
  CHECK(got.holes == std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 2}});
  CHECK(got.hit_tokens == 4);
  CHECK(got.recompute_tokens == 2);
}
