#pragma once
// KvTierLinks: what the swap engine moves KV between the device tier and the
// host tier with, on one backend: the device pool's memory, a host tier of
// the device pool's layout that the device can copy from and to
// asynchronously (plain memory on the CPU backend, pinned memory on CUDA),
// and one copy stream per direction (CPU streams on the CPU backend, CUDA
// streams on CUDA: host -> device on one, device -> host on the other, so a
// swap-out still copying never delays a later swap-in).
//
// `owners` keeps the device memory (and whatever the streams run on) alive
// while the links live; the swap engine destroys the streams first.
#include "gpu/kv/kv_pool.hpp"
#include "gpu/kv/kv_tier_memory.hpp"
#include "runtime/stream.hpp"

#include <memory>
#include <vector>

namespace pensieve::backend {

struct KvTierLinks {
  kv::KvTierMemory device;
  std::unique_ptr<kv::KvPool> host;
  std::unique_ptr<rt::Stream> copy_in;   // host -> device
  std::unique_ptr<rt::Stream> copy_out;  // device -> host
  std::vector<std::shared_ptr<const void>> owners;
};

// The host tier's pool: `device`'s layout with `slots` blocks, never
// poisoned (no kernel reads it).
kv::KvPoolConfig host_tier_config(const kv::KvPoolConfig& device, std::int32_t slots);

}  // namespace pensieve::backend
