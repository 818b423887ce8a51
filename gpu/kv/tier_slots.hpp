#pragma once
// Where a chunk (one KV block, every layer's K and V) lives below the
// device: a slot of the host tier (a block of the host KvPool) and a slot of
// the disk tier (gpu/kv/disk_tier_file.hpp). One type each, used by the
// disk tier's file, the transfers the swap engine executes, and the tiers'
// bookkeeping in actors/.
#include <compare>
#include <cstdint>

namespace pensieve::kv {

struct HostSlot {
  std::uint32_t value = 0;
  friend constexpr auto operator<=>(HostSlot, HostSlot) = default;
};

struct DiskSlot {
  std::uint32_t value = 0;
  friend constexpr auto operator<=>(DiskSlot, DiskSlot) = default;
};

}  // namespace pensieve::kv
