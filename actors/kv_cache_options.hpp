#pragma once
// The tiered KV cache's configuration, in two parts: its options (what the
// command line sets, built once in tools/pensieve/main.cpp and handed down
// whole: engine -> scheduler -> KV cache) and its sizes (what the engine
// derives from the pools' byte budgets once the model is loaded).
#include "actors/disk_restore_rule.hpp"
#include "actors/eviction_policy.hpp"

#include <cstdint>

namespace pensieve::actors {

struct KvCacheOptions {
  EvictionPolicyKind eviction_policy = EvictionPolicyKind::cost_aware;  // --eviction-policy
  CostModel cost_model;  // the recompute costs eviction weighs; the engine may recalibrate them
  // Below this share of free (or clean) device blocks, idle chunks are
  // copied to the host ahead of time; also the share of host slots kept free
  // (or clean) by spilling to disk (--swap-out-watermark).
  double swap_out_watermark = 0.25;
  // The share of the device's blocks that pins may hold at most
  // (--pin-cap-share): a pin past it is refused, so pinned prefixes never
  // leave running turns too little room.
  double pin_cap_share = 0.5;
  // Chunks on disk only: read back or recomputed (actors/disk_restore_rule.hpp).
  DiskRestoreMode disk_restore = DiskRestoreMode::rule;
  // cost_model is in seconds (measured, or a profile's): the rule can
  // weigh it against the measured disk reads.
  bool cost_in_seconds = false;
};

struct KvCacheSizes {
  std::int32_t num_blocks = 0;   // device KV blocks
  std::int32_t block_tokens = 32;
  std::int32_t host_slots = 0;   // host KV chunks; 0: device only (whole conversations dropped)
  std::int32_t disk_slots = 0;   // disk KV chunks (used only with a host tier)
};

}  // namespace pensieve::actors
