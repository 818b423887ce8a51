#pragma once
// GpuWorkerActor: one device, its model and its KV pool. Runs each batch's
// forward pass on the device's compute stream, co_awaits the stream's event
// (the actor's thread stays free meanwhile), samples each sequence's next
// token with that sequence's own sampler and replies to the scheduler.
//
// The CPU backend: the stream is a CpuStream and the pass is CpuForward over
// a paged KvPool in host memory. The CUDA backend plugs in here with a CUDA
// stream and the CUDA forward pass; the messages stay the same.
//
// Owns the forward pass, the KV memory, the samplers and the stream. Its
// handler runs on the actor's executor; the pass runs on the stream's thread
// while the handler awaits it, never both at once.
#include "actors/gpu_worker_protocol.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "gpu/model/cpu_forward.hpp"
#include "runtime/trace.hpp"

#include <boost/asio/awaitable.hpp>

#include <memory>

namespace pensieve::actors {

struct GpuWorkerConfig {
  kv::KvPoolConfig pool;          // the device tier (layers and heads from the model)
  model::VocabInfo vocab;         // EOS / end-of-turn ids for the samplers
  rt::Tracer* tracer = nullptr;   // stream spans, when enabled
};

class GpuWorker {
 public:
  GpuWorker(model::CpuForward forward, GpuWorkerConfig config);
  GpuWorker(GpuWorker&&) noexcept;
  GpuWorker& operator=(GpuWorker&&) noexcept;
  ~GpuWorker();

  boost::asio::awaitable<void> operator()(RunBatch message);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace pensieve::actors
