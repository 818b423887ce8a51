// TierMoveLedger: a move in flight holds a reference on both of its ends
// until the swap engine reports it, and the report names the chunk it was
// for, even once that chunk has left the cache.
#include "actors/tier_move_ledger.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace pensieve;
using namespace pensieve::actors;

namespace {

TierPools pools_of(std::int32_t n) { return TierPools{DevicePool(n), HostPool(n), DiskPool(n)}; }

bool same(const ChunkKey& a, const ChunkKey& b) {
  return a.conversation == b.conversation && a.index == b.index && a.id == b.id;
}

}  // namespace

TEST_CASE("a swap-out keeps its device block and host slot until it is reported", "[kv_cache][tiers]") {
  TierPools pools = pools_of(4);
  TierMoveLedger moves;
  const kv::BlockId b = *pools.device.allocate();
  const HostSlot h = *pools.host.allocate();
  KvTransfers out;
  const ChunkKey key{ConversationId{7}, 2, 41};
  moves.swap_out(key, b, h, pools, out);
  REQUIRE(out.swap_out.size() == 1);
  CHECK(out.swap_out[0].device == b);
  CHECK(out.swap_out[0].host == h);
  CHECK(pools.device.ref_count(b) == 2);
  CHECK(pools.host.ref_count(h) == 2);
  // The chunk leaves the cache: its own references go, the move's stay.
  std::vector<kv::BlockId> freed;
  pools.device.release(b, freed);
  pools.host.release(h);
  CHECK(freed.empty());
  CHECK(pools.device.free_slots() == 3);
  CHECK(pools.host.free_slots() == 3);
  CHECK(moves.swap_outs() == 1);
  const auto done = moves.swap_out_done({b, h}, pools, freed);
  REQUIRE(done.has_value());
  CHECK(same(*done, key));
  CHECK(freed == std::vector<kv::BlockId>{b});
  CHECK(pools.device.free_list().back() == b);
  CHECK(pools.host.free_slots() == 4);
  CHECK(moves.empty());
}

TEST_CASE("spills are found by their disk slot and restores by their host slot, each with its tokens",
          "[kv_cache][tiers]") {
  TierPools pools = pools_of(4);
  TierMoveLedger moves;
  const HostSlot h0 = *pools.host.allocate(), h1 = *pools.host.allocate();
  const DiskSlot d0 = *pools.disk.allocate(), d1 = *pools.disk.allocate();
  KvTransfers out;
  const std::vector<std::int32_t> a{1, 2, 3, 4}, b{5, 6};
  moves.spill({ConversationId{1}, 0, 10}, h0, d1, a, pools, out);
  moves.restore({ConversationId{2}, 3, 11}, d0, h1, b, pools, out);
  REQUIRE(out.spill.size() == 1);
  REQUIRE(out.restore.size() == 1);
  CHECK(out.spill[0].host == h0);
  CHECK(out.spill[0].disk == d1);
  CHECK(out.spill[0].tokens == a);
  CHECK(out.restore[0].host == h1);
  CHECK(out.restore[0].disk == d0);
  CHECK(out.restore[0].tokens == b);
  CHECK(moves.spills() == 1);
  CHECK(moves.restores() == 1);
  CHECK(moves.disk_busy());
  CHECK(pools.disk.ref_count(d1) == 2);
  CHECK(pools.host.ref_count(h1) == 2);

  const auto restored = moves.restore_done(out.restore[0], pools);
  REQUIRE(restored.has_value());
  CHECK(same(*restored, ChunkKey{ConversationId{2}, 3, 11}));
  CHECK(pools.host.ref_count(h1) == 1);  // the chunk's own reference
  CHECK(pools.disk.ref_count(d0) == 1);
  CHECK(moves.disk_busy());
  const auto spilled = moves.spill_done(out.spill[0], pools);
  REQUIRE(spilled.has_value());
  CHECK(same(*spilled, ChunkKey{ConversationId{1}, 0, 10}));
  CHECK(pools.host.ref_count(h0) == 1);
  CHECK(pools.disk.ref_count(d1) == 1);
  CHECK_FALSE(moves.disk_busy());
  CHECK(moves.empty());
}
