// TierPool: one tier's slots in their own id type, handed out front first,
// returned to the back when their last reference goes.
#include "actors/tier_pool.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace pensieve;
using namespace pensieve::actors;

TEST_CASE("a tier pool hands out its slots front first and says when it has none", "[kv_cache][tiers]") {
  HostPool pool(3);
  CHECK(pool.slots() == 3);
  CHECK(pool.allocate() == HostSlot{0});
  CHECK(pool.allocate() == HostSlot{1});
  CHECK(pool.allocate() == HostSlot{2});
  CHECK_FALSE(pool.allocate().has_value());
  CHECK(pool.free_slots() == 0);
  CHECK(pool.release(HostSlot{1}));
  CHECK(pool.release(HostSlot{0}));
  CHECK(pool.free_list() == std::vector<HostSlot>{HostSlot{1}, HostSlot{0}});
  CHECK(pool.allocate() == HostSlot{1});
}

TEST_CASE("a slot with another holder stays taken until its last reference goes", "[kv_cache][tiers]") {
  DevicePool pool(2);
  const kv::BlockId b = *pool.allocate();
  pool.retain(b);
  CHECK(pool.ref_count(b) == 2);
  std::vector<kv::BlockId> freed;
  pool.release(b, freed);
  CHECK(freed.empty());
  CHECK(pool.free_slots() == 1);
  pool.release(b, freed);
  CHECK(freed == std::vector<kv::BlockId>{b});
  CHECK(pool.free_slots() == 2);
  CHECK(pool.allocator().free_blocks() == 2);  // block tables see the same free list
}

TEST_CASE("a pool of no slots, or of a negative count, has none to give", "[kv_cache][tiers]") {
  DiskPool none(0);
  DiskPool negative(-3);
  CHECK_FALSE(none.allocate().has_value());
  CHECK(negative.slots() == 0);
  CHECK_FALSE(negative.allocate().has_value());
}
