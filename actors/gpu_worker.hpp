#pragma once
// GpuWorkerActor: one device, its model and its KV pool. Runs each batch's
// forward pass on the device's compute stream, co_awaits the stream's event
// (the actor's thread stays free meanwhile), samples each sequence's next
// token with that sequence's own sampler and replies to the scheduler.
//
// The pass is a backend::PagedForward (gpu/backend/paged_forward.hpp):
// CpuForward over a paged KvPool in host memory, TpForward over N ranks'
// pools kept in step (--tp), or CudaForward over a device pool (--backend
// cuda). The stream is a CpuStream whose worker drives the backend; the
// messages stay the same whatever the backend.
//
// Pipelined swap-in: a batch may come with one event per layer (the swap
// engine's copies of that layer's chunks); the pass waits for layer l's
// event just before layer l, so copies of later layers overlap compute of
// earlier ones. On the CPU backend the compute stream's worker waits for
// the event (the copy stream runs on another worker of the same pool); on
// CUDA it would be cudaStreamWaitEvent on the compute stream.
//
// Owns the forward pass, the KV memory, the samplers and the stream. Its
// handler runs on the actor's executor; the pass runs on the stream's thread
// while the handler awaits it, never both at once.
#include "actors/gpu_worker_protocol.hpp"
#include "gpu/backend/paged_forward.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "gpu/model/cpu_forward.hpp"
#include "runtime/cpu_stream.hpp"
#include "runtime/trace.hpp"

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <memory>

namespace pensieve::actors {

struct GpuWorkerConfig {
  kv::KvPoolConfig pool;          // the device tier of a CpuForward (a PagedForward has its own)
  model::VocabInfo vocab;         // EOS / end-of-turn ids for the samplers
  rt::Tracer* tracer = nullptr;   // stream spans, when enabled (one per compute layer too)
  // Test hook, on the compute stream's worker when layer l starts computing
  // (after its swap-in event): lets a test see the pipeline's order.
  std::function<void(std::int32_t layer)> on_layer_start;
  // The compute threads' nice value (EngineOptions::compute_nice): the
  // stream's worker lowers itself to it before a pass, and the forward's
  // thread pool follows. 0: unchanged.
  int compute_nice = 0;
};

class GpuWorker {
 public:
  GpuWorker(model::CpuForward forward, GpuWorkerConfig config);
  // Any backend; config.pool is unused (the backend owns its pools).
  GpuWorker(std::unique_ptr<backend::PagedForward> forward, GpuWorkerConfig config);
  GpuWorker(GpuWorker&&) noexcept;
  GpuWorker& operator=(GpuWorker&&) noexcept;
  ~GpuWorker();

  boost::asio::awaitable<void> operator()(RunBatch message);

  // The device tier and the stream pool the swap engine's copy stream runs
  // on (beside the compute stream): shared, so that copies still in flight
  // when this worker goes keep their memory. device_pool() is null when the
  // backend's KV is not one host pool (--tp > 1, --backend cuda).
  std::shared_ptr<kv::KvPool> device_pool() const;
  const kv::KvPoolConfig& pool_config() const;  // one rank's layout
  std::shared_ptr<rt::CpuStreamPool> stream_pool() const;
  // The backend's own swap links (PagedForward::device_tier_links); call
  // before the worker is spawned.
  Result<std::optional<backend::KvTierLinks>> device_tier_links(std::int32_t host_slots);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace pensieve::actors
