#include "actors/gpu_worker.hpp"

#include "runtime/cpu_stream.hpp"
#include "runtime/clock.hpp"

#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <map>

namespace pensieve::actors {

namespace asio = boost::asio;

struct GpuWorker::State {
  State(model::CpuForward f, GpuWorkerConfig c)
      : forward(std::move(f)),
        config(std::move(c)),
        pool(config.pool),
        stream_pool(1),
        stream(stream_pool, "compute", config.tracer) {}

  void run(const IterationPlan& plan, BatchOutcome& outcome);

  model::CpuForward forward;
  GpuWorkerConfig config;
  kv::KvPool pool;
  std::map<TurnId, model::Sampler> samplers;
  rt::CpuStreamPool stream_pool;
  rt::CpuStream stream;  // declared last: destroyed first, after its work
};

void GpuWorker::State::run(const IterationPlan& plan, BatchOutcome& outcome) {
  const auto start = std::chrono::steady_clock::now();
  // Poison first: a freed block may be reused by this very batch.
  if (pool.config().poison_freed) {
    for (kv::BlockId b : plan.freed_blocks) pool.poison(b);
  }
  for (TurnId t : plan.released_samplers) samplers.erase(t);
  for (const kv::CopyOnWrite& c : plan.copies) pool.copy_prefix(c.src, c.dst, c.tokens);
  std::vector<model::PagedSequence> batch;
  batch.reserve(plan.sequences.size());
  for (const PlannedSequence& p : plan.sequences) {
    if (p.new_sampler) {
      samplers.insert_or_assign(p.turn, model::Sampler(*p.new_sampler, config.vocab, p.sampler_context));
    }
    batch.push_back({p.tokens, p.start_pos, p.blocks, false});
  }
  auto out = forward.forward_paged(batch, pool);
  if (!out) {
    outcome.error = out.error().message;
    return;
  }
  for (std::size_t i = 0; i < plan.sequences.size(); ++i) {
    const PlannedSequence& p = plan.sequences[i];
    if (!p.sample) continue;
    auto it = samplers.find(p.turn);
    if (it == samplers.end()) {
      outcome.samples.clear();
      outcome.error = "internal: no sampler for a planned turn";
      return;
    }
    SampleResult r{p.turn, it->second.sample(out->last(i))};
    r.finish = it->second.finish_reason(r.token.token);
    outcome.samples.push_back(std::move(r));
  }
  outcome.compute_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

GpuWorker::GpuWorker(model::CpuForward forward, GpuWorkerConfig config)
    : state_(std::make_unique<State>(std::move(forward), std::move(config))) {}
GpuWorker::GpuWorker(GpuWorker&&) noexcept = default;
GpuWorker& GpuWorker::operator=(GpuWorker&&) noexcept = default;
GpuWorker::~GpuWorker() = default;

asio::awaitable<void> GpuWorker::operator()(RunBatch message) {
  auto outcome = std::make_shared<BatchOutcome>();
  State* state = state_.get();
  // Shared with the stream's work item, which may outlive this frame when
  // the actor is torn down while the pass runs.
  auto plan = std::make_shared<const IterationPlan>(std::move(message.plan));
  state->stream.enqueue([state, plan, outcome] { state->run(*plan, *outcome); }, "forward");
  rt::Event done = state->stream.record();
  auto executor = co_await asio::this_coro::executor;
  co_await done.wait(executor, asio::use_awaitable);
  message.reply.send(std::move(*outcome));
}

}  // namespace pensieve::actors
