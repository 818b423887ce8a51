// KvCacheManager, the device cache manager: blocks or a plain no, one
// eviction step at a time with what it achieved, and a returning turn's
// chunks handed back with exact block ids.
#include "actors/kv_cache_manager.hpp"

#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

using namespace pensieve;
using namespace pensieve::actors;

namespace {

std::vector<std::int32_t> token_run(std::size_t n, std::int32_t first) {
  std::vector<std::int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

KvCacheOptions lru_no_watermark() {
  KvCacheOptions o;
  o.eviction_policy = EvictionPolicyKind::lru;
  o.swap_out_watermark = 0.0;
  return o;
}

// Caches `n` tokens of `conversation` (filled from the manager's own blocks).
void cache(KvCacheManager& kv, std::uint64_t conversation, std::size_t n, std::int64_t now_ns,
           std::vector<kv::BlockId>& freed) {
  kv::BlockTable table(kv.block_tokens());
  REQUIRE(kv.append(table, std::int64_t(n)).has_value());
  kv.put(ConversationId{conversation}, token_run(n, std::int32_t(100 * conversation)), std::move(table), now_ns,
         freed);
}

}  // namespace

TEST_CASE("the cache manager gives blocks while the device has them and a plain no when it has not",
          "[kv_cache][tiers]") {
  KvCacheManager kv({.num_blocks = 4, .block_tokens = 4}, {});
  kv::BlockTable table(4);
  const auto first = kv.append(table, 10);
  REQUIRE(first.has_value());
  CHECK(first->new_blocks == 3);
  CHECK(std::vector<kv::BlockId>(table.blocks().begin(), table.blocks().end()) ==
        std::vector<kv::BlockId>{kv::BlockId{0}, kv::BlockId{1}, kv::BlockId{2}});
  CHECK(kv.blocks_needed(table, 7) == 2);
  CHECK_FALSE(kv.append(table, 7).has_value());  // 2 blocks wanted, 1 free: nothing changes
  CHECK(table.num_tokens() == 10);
  CHECK(kv.free_device_blocks() == 1);
  std::vector<kv::BlockId> freed;
  kv.truncate(table, 4, freed);
  CHECK(freed == std::vector<kv::BlockId>{kv::BlockId{2}, kv::BlockId{1}});
  CHECK(kv.free_device_blocks() == 3);
}

TEST_CASE("without tiers each room step evicts the coldest whole conversation, then says nothing is left",
          "[kv_cache][tiers]") {
  KvCacheManager kv({.num_blocks = 4, .block_tokens = 4}, lru_no_watermark());
  std::vector<kv::BlockId> freed;
  cache(kv, 1, 5, 10, freed);  // blocks 0, 1
  cache(kv, 2, 3, 20, freed);  // block 2
  KvTransfers out;
  DeviceRoom room = kv.make_device_room(30, out, freed);
  CHECK(room.step == DeviceRoom::Step::progress);
  CHECK(room.coming == 0);
  CHECK_FALSE(kv.tokens(ConversationId{1}).has_value());  // least recently active first
  CHECK(kv.tokens(ConversationId{2}).has_value());
  CHECK(freed == std::vector<kv::BlockId>{kv::BlockId{0}, kv::BlockId{1}});
  room = kv.make_device_room(31, out, freed);
  CHECK(room.step == DeviceRoom::Step::progress);
  CHECK(kv.size() == 0);
  CHECK(kv.make_device_room(32, out, freed).step == DeviceRoom::Step::exhausted);
  CHECK(out.empty());
  CHECK(kv.stats().evicted_conversations == 2);
  CHECK(kv.stats().device_dropped == 3);
}

TEST_CASE("with a host tier a device chunk is copied out before its block is reused, and comes back swapped in",
          "[kv_cache][tiers]") {
  KvCacheManager kv({.num_blocks = 2, .block_tokens = 4, .host_slots = 2}, lru_no_watermark());
  std::vector<kv::BlockId> freed;
  cache(kv, 1, 4, 10, freed);  // block 0
  KvTransfers out;
  const DeviceRoom room = kv.make_device_room(20, out, freed);
  CHECK(room.step == DeviceRoom::Step::progress);
  CHECK(room.coming == 1);  // the copy-out frees block 0 once reported
  REQUIRE(out.swap_out.size() == 1);
  CHECK(out.swap_out[0].device == kv::BlockId{0});
  CHECK(out.swap_out[0].host == HostSlot{0});
  CHECK(kv.free_device_blocks() == 1);
  CHECK(freed.empty());
  kv.transfers_done({.swap_out = out.swap_out}, freed);
  CHECK(freed == std::vector<kv::BlockId>{kv::BlockId{0}});
  CHECK(kv.free_device_blocks() == 2);
  REQUIRE(kv.chunks(ConversationId{1}).size() == 1);
  CHECK(kv.chunks(ConversationId{1})[0].tier == ChunkTier::host);

  // The conversation returns with one more token: its chunk is swapped into
  // the front of the free list (block 1; block 0 went to the back).
  KvTransfers next;
  auto want = token_run(4, 100);
  want.push_back(7);
  REQUIRE(kv.attach(ConversationId{1}, TurnId{9}, want, 30, next, freed));
  CHECK(kv.attached_to(ConversationId{1}, TurnId{9}));
  CHECK(kv.ready(ConversationId{1}));
  CHECK(kv.blocks_to_materialize(ConversationId{1}) == 1);
  AttachedKv back = kv.materialize(ConversationId{1}, freed);
  CHECK(back.computed == 4);
  CHECK(back.hit_tokens == 4);
  CHECK(back.holes.empty());
  REQUIRE(back.swap_in.size() == 1);
  CHECK(back.swap_in[0].device == kv::BlockId{1});
  CHECK(back.swap_in[0].host == HostSlot{0});
  CHECK(kv.size() == 0);
  CHECK(kv.stats().hit_tokens_host == 4);
  kv.release_host(back.swap_in[0].host);
  CHECK(kv.stats().free_host_slots == 2);
}

TEST_CASE("while a spill makes host room the manager says wait rather than drop a device chunk",
          "[kv_cache][tiers]") {
  // One host slot, one disk slot. Conversation 1 goes to the host, then on
  // to disk (a spill in flight); conversation 2's device chunk finds no
  // host slot and no spare disk slot: it waits for the spill's report.
  KvCacheManager kv({.num_blocks = 2, .block_tokens = 4, .host_slots = 1, .disk_slots = 1}, lru_no_watermark());
  std::vector<kv::BlockId> freed;
  cache(kv, 1, 4, 10, freed);
  KvTransfers out;
  REQUIRE(kv.make_device_room(20, out, freed).step == DeviceRoom::Step::progress);
  kv.transfers_done({.swap_out = out.swap_out}, freed);
  cache(kv, 2, 4, 30, freed);
  KvTransfers more;
  const DeviceRoom spilling = kv.make_device_room(40, more, freed);
  CHECK(spilling.step == DeviceRoom::Step::progress);
  CHECK(spilling.coming == 1);  // the spill makes host room for one copy-out
  REQUIRE(more.spill.size() == 1);
  CHECK(more.spill[0].host == HostSlot{0});
  CHECK(more.spill[0].tokens == token_run(4, 100));
  KvTransfers none;
  CHECK(kv.make_device_room(41, none, freed).step == DeviceRoom::Step::wait);
  CHECK(none.empty());
  CHECK(kv.chunks(ConversationId{2})[0].tier == ChunkTier::device);
}
