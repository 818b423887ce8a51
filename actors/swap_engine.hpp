#pragma once
// SwapEngineActor: executes the KV tier moves the scheduler core decided
// (kv_transfers.hpp). It owns the host tier (a KvPool with the device pool's
// layout: plain memory on the CPU backend, pinned memory on CUDA; one rank
// only, see Engine::create), two copy streams beside the GPU worker's compute
// stream (one per direction: CPU streams, or CUDA streams where every run is
// one cudaMemcpyAsync), and the disk tier when one is configured (a DiskTier).
// What it copies with comes as backend::KvTierLinks.
//
// Per iteration: swap_in (host -> device) on the copy-in stream, layer by
// layer, every chunk's layer-l slice (K and V) then one event per layer, so
// the forward pass of layer i waits only for layer i; swap_out (device ->
// host) on the copy-out stream the same way, after that iteration's swap_in
// (host -> device first, as Pensieve does), while a later iteration's
// swap_in never waits behind it. The reply carries the per-layer events at
// once: nothing here waits for a copy. Swap_out completion and the disk moves (spill: host -> disk,
// restore: disk -> host, each after the iteration's copies) are reported
// through config.report as TransfersDone once they have finished.
//
// Ownership and threads: the handler runs on the executor it was spawned on
// (with the scheduler, on the control thread); the copies run on the copy
// streams' workers; disk I/O are coroutines on the handler's executor. The
// device pool and the stream pool are shared with the GPU worker.
#include "actors/disk_tier.hpp"
#include "actors/swap_engine_protocol.hpp"
#include "gpu/backend/kv_tier_links.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "runtime/cpu_stream.hpp"
#include "runtime/task_group.hpp"
#include "runtime/trace.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <functional>
#include <memory>

namespace pensieve::actors {

struct SwapEngineConfig {
  std::int32_t host_slots = 0;  // host tier capacity in chunks (same layout as the device pool)
  bool gather = true;           // merge copies of adjacent chunks into one transfer
  // A merged transfer is cut here: DMA of 0.5-2 MB blocks reaches PCIe's
  // bandwidth (vLLM's offload measurements) and a longer one delays the
  // event of its layer for nothing.
  std::size_t max_transfer_bytes = std::size_t(2) << 20;
  // Small scattered runs of a layer pass through one launch of the backend's
  // gather kernel where it has one (KvTierLinks::gather, under
  // kernels/swap_copy_plan.hpp's rule); off: every run is one DMA copy.
  bool gather_kernel = true;
  rt::Tracer* tracer = nullptr;
  std::shared_ptr<DiskTier> disk;  // the disk tier; null: none
  // Receives what finished, on the engine's executor (the scheduler's inbox).
  std::function<void(TransfersDone)> report;
  // Test hook, on the copy stream's worker before each layer's copies of a
  // direction ("swap_in" or "swap_out"): lets a test make copies slow.
  std::function<void(std::string_view direction, std::int32_t layer)> before_copy_layer;
};

class SwapEngine {
 public:
  // `device`, `streams`: the GPU worker's (GpuWorker::device_pool() and
  // stream_pool()). `group` holds the disk I/O coroutines.
  SwapEngine(std::shared_ptr<kv::KvPool> device, std::shared_ptr<rt::CpuStreamPool> streams, rt::TaskGroup& group,
             boost::asio::any_io_executor executor, SwapEngineConfig config);
  // Over a backend's own links (PagedForward::device_tier_links: CUDA device
  // memory, a pinned host tier, CUDA copy streams); links.host has
  // config.host_slots chunks.
  SwapEngine(backend::KvTierLinks links, rt::TaskGroup& group, boost::asio::any_io_executor executor,
             SwapEngineConfig config);

  void operator()(SwapIteration message);
  void operator()(GetSwapStats message);

  // The host tier (tests read and fill it; valid while the actor lives).
  kv::KvPool& host_pool();
  // Bytes of one chunk, every layer, K and V.
  std::size_t chunk_bytes() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// What a chunk's slot holds, packed layer after layer (the disk format's
// body); `out` has chunk_bytes. And the reverse.
void pack_chunk(const kv::KvPool& pool, std::uint32_t slot, std::span<std::byte> out);
void unpack_chunk(kv::KvPool& pool, std::uint32_t slot, std::span<const std::byte> in);

}  // namespace pensieve::actors
