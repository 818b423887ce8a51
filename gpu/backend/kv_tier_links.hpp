#pragma once
// KvTierLinks: what the swap engine moves KV between the device tier and the
// host tier with, on one backend: the device pool's memory, a host tier of
// the device pool's layout that the device can copy from and to
// asynchronously (plain memory on the CPU backend, pinned memory on CUDA),
// and one copy stream per direction (CPU streams on the CPU backend, CUDA
// streams on CUDA: host -> device on one, device -> host on the other, so a
// swap-out still copying never delays a later swap-in).
//
// Each layer pass of a swap is a batch of runs (a device span and a host
// span of the same size, adjacent chunks already merged) for one direction;
// copy_tier_runs executes them as kernels/swap_copy_plan.hpp decides: one
// stream copy (cudaMemcpyAsync) per large run, one launch of the backend's
// gather for the small ones when there are enough of them, all on that
// direction's copy stream, so an event recorded after the call follows
// every byte of the pass. A backend without a gather (the CPU backend, where
// both tiers are RAM) copies each run with the stream.
//
// `owners` keeps the device memory (and whatever the streams run on) alive
// while the links live; the swap engine destroys the streams first.
#include "gpu/kernels/swap_copy_plan.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "gpu/kv/kv_tier_memory.hpp"
#include "runtime/stream.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace pensieve::backend {

enum class TierDirection { to_device, to_host };

struct TierRun {
  std::byte* device = nullptr;
  std::byte* host = nullptr;
  std::size_t bytes = 0;
};

// Copies many small runs in one launch on a copy stream (CUDA: the gather
// kernel, whose threads read and write pinned host memory directly; it
// copies either way, so a swap-in is the same kernel scattering into the
// device). The runs need not outlive the call. A device fault throws, as a
// failing copy on the stream does.
class TierGather {
 public:
  virtual ~TierGather() = default;
  virtual void launch(rt::Stream& stream, TierDirection direction, std::span<const TierRun> runs,
                      std::string_view op) = 0;
};

struct KvTierLinks {
  kv::KvTierMemory device;
  std::unique_ptr<kv::KvPool> host;
  std::unique_ptr<rt::Stream> copy_in;   // host -> device
  std::unique_ptr<rt::Stream> copy_out;  // device -> host
  std::vector<std::shared_ptr<const void>> owners;
  std::unique_ptr<TierGather> gather;  // null: every run is one stream copy
  kernels::SwapCopyThresholds thresholds;
};

// What one copy_tier_runs call enqueued.
struct TierCopyCount {
  std::size_t copies = 0;    // stream copies (DMA)
  std::size_t launches = 0;  // gather launches
  std::size_t gathered = 0;  // runs those launches carried
};

// One direction's runs on `stream` (that direction's copy stream). `gather`
// null: one stream copy per run.
TierCopyCount copy_tier_runs(rt::Stream& stream, TierGather* gather, const kernels::SwapCopyThresholds& thresholds,
                             TierDirection direction, std::span<const TierRun> runs, std::string_view op);
// On the links' own stream of that direction, gather and thresholds.
TierCopyCount copy_tier_runs(KvTierLinks& links, TierDirection direction, std::span<const TierRun> runs,
                             std::string_view op);

// The host tier's pool: `device`'s layout with `slots` blocks, never
// poisoned (no kernel reads it).
kv::KvPoolConfig host_tier_config(const kv::KvPoolConfig& device, std::int32_t slots);

}  // namespace pensieve::backend
