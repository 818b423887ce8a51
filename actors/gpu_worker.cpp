#include "actors/gpu_worker.hpp"

#include "gpu/backend/cpu/cpu_paged_forward.hpp"
#include "gpu/kernels/cpu/thread_pool.hpp"
#include "runtime/cpu_stream.hpp"
#include "runtime/clock.hpp"
#include "runtime/thread_priority.hpp"
#include "runtime/trace_names.hpp"

#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <map>
#include <set>

namespace pensieve::actors {

namespace asio = boost::asio;

struct GpuWorker::State {
  State(std::unique_ptr<backend::PagedForward> f, GpuWorkerConfig c)
      : forward(std::move(f)),
        config(std::move(c)),
        // Compute and copy streams must run at once (the compute worker
        // blocks on a copy's event mid-pass), plus one spare worker.
        stream_pool(std::make_shared<rt::CpuStreamPool>(3)),
        stream(*stream_pool, "compute", config.tracer) {
    // A backend without host threads of its own (CUDA, tensor-parallel
    // ranks) gets a pool for its draws: at a 152k vocabulary a batch of 256
    // would otherwise sample for ~25 ms per iteration on one thread.
    if (forward->host_threads() <= 1 && kernels::cpu::default_thread_count() > 1)
      sampling_pool = std::make_unique<kernels::cpu::ThreadPool>(kernels::cpu::default_thread_count());
  }

  void run(const IterationPlan& plan, std::span<const rt::Event> layer_ready, BatchOutcome& outcome);
  void wait_for_layer(std::int32_t layer, std::span<const rt::Event> layer_ready);
  void record_layer(std::int32_t layer, std::int64_t start_ns) const;

  std::unique_ptr<backend::PagedForward> forward;
  GpuWorkerConfig config;
  std::map<TurnId, model::Sampler> samplers;
  std::vector<model::Sampler::Scratch> sample_scratch;  // one per host thread, for every sampler
  std::unique_ptr<kernels::cpu::ThreadPool> sampling_pool;  // null: the backend's host threads
  std::shared_ptr<rt::CpuStreamPool> stream_pool;
  rt::CpuStream stream;  // declared last: destroyed first, after its work
};

void GpuWorker::State::record_layer(std::int32_t layer, std::int64_t start_ns) const {
  if (config.tracer == nullptr || !config.tracer->enabled()) return;
  char detail[24];
  std::snprintf(detail, sizeof detail, "layer %d", layer);
  rt::SpanRecord span{rt::SpanKind::stream, rt::trace_names::compute_stream, "layer", std::uint64_t(layer), start_ns,
                      rt::steady_now_ns()};
  span.detail = detail;
  config.tracer->record(span);
}

void GpuWorker::State::wait_for_layer(std::int32_t layer, std::span<const rt::Event> layer_ready) {
  if (std::size_t(layer) >= layer_ready.size()) return;
  const rt::Event& ready = layer_ready[std::size_t(layer)];
  if (ready.is_complete()) return;
  // This stream's worker waits (the copy stream has its own): the CPU
  // backend; a backend that waits on the device got them through
  // gate_next_pass.
  const std::int64_t start = rt::steady_now_ns();
  ready.wait_blocking();
  if (config.tracer != nullptr) {
    config.tracer->record({rt::SpanKind::stream, rt::trace_names::compute_stream, rt::trace_names::stream_wait,
                           std::uint64_t(layer), start, rt::steady_now_ns()});
  }
}

void GpuWorker::State::run(const IterationPlan& plan, std::span<const rt::Event> layer_ready, BatchOutcome& outcome) {
  const auto start = std::chrono::steady_clock::now();
  rt::lower_this_thread_priority(config.compute_nice);  // once per pool thread; then a cached check
  // Poison first: a freed block may be reused by this very batch. Not the
  // blocks this batch swaps in: the copy stream is writing them now.
  if (forward->pool_config().poison_freed) {
    std::set<std::uint32_t> swapped_in;
    for (const DeviceHostCopy& c : plan.transfers.swap_in) swapped_in.insert(c.device.value);
    for (kv::BlockId b : plan.freed_blocks) {
      if (swapped_in.contains(b.value)) continue;
      if (auto ok = forward->poison(b); !ok) {
        outcome.error = ok.error().message;
        return;
      }
    }
  }
  for (TurnId t : plan.released_samplers) samplers.erase(t);
  // A copy-on-write reads every layer of its source, which may be arriving.
  // A backend that waits on the device (CUDA) gets the events instead: its
  // stream waits, this thread never blocks.
  const bool on_device = forward->gates_on_device();
  if (!plan.copies.empty() && !layer_ready.empty()) {
    if (on_device) {
      if (auto ok = forward->wait_on_device(layer_ready.back()); !ok) {
        outcome.error = ok.error().message;
        return;
      }
    } else {
      wait_for_layer(std::int32_t(layer_ready.size()) - 1, layer_ready);
    }
  }
  for (const kv::CopyOnWrite& c : plan.copies) {
    if (auto ok = forward->copy_prefix(c.src, c.dst, c.tokens); !ok) {
      outcome.error = ok.error().message;
      return;
    }
  }
  std::vector<model::PagedSequence> batch;
  batch.reserve(plan.sequences.size());
  for (const PlannedSequence& p : plan.sequences) {
    if (p.new_sampler) {
      samplers.insert_or_assign(p.turn, model::Sampler(*p.new_sampler, config.vocab, p.sampler_context));
    }
    batch.push_back({p.tokens, p.start_pos, p.blocks, false});
  }
  std::int64_t layer_start = 0;
  auto before_layer = [&](std::int32_t l) {
    if (l > 0) record_layer(l - 1, layer_start);
    if (!on_device) wait_for_layer(l, layer_ready);
    // The span starts before the hook runs: a hook that releases another
    // thread (the overlap test's copy of a later layer) must see the layer
    // already started, however late this thread is scheduled again.
    layer_start = rt::steady_now_ns();
    if (config.on_layer_start) config.on_layer_start(l);
  };
  if (on_device && !layer_ready.empty()) forward->gate_next_pass({layer_ready.begin(), layer_ready.end()});
  auto out = forward->forward_paged(batch, before_layer);
  // The last layer's span also covers the output head.
  if (layer_start != 0) record_layer(forward->config().n_layers - 1, layer_start);
  if (!out) {
    outcome.error = out.error().message;
    return;
  }
  // Each sequence's draw depends only on its own sampler, so the batch's
  // draws split over the host threads (a vocabulary pass each: 32k-152k
  // logits, tens of microseconds at a time per sequence).
  std::vector<std::pair<std::size_t, model::Sampler*>> draws;
  for (std::size_t i = 0; i < plan.sequences.size(); ++i) {
    const PlannedSequence& p = plan.sequences[i];
    if (!p.sample) continue;
    auto it = samplers.find(p.turn);
    if (it == samplers.end()) {
      outcome.error = "internal: no sampler for a planned turn";
      return;
    }
    draws.emplace_back(i, &it->second);
  }
  outcome.samples.resize(draws.size());
  sample_scratch.resize(sampling_pool ? sampling_pool->size() : forward->host_threads());
  const double cost = 8.0 * double(draws.size()) * double(config.vocab.vocab_size);
  const backend::PagedForward::HostBody body = [&](std::size_t begin, std::size_t end, std::size_t thread) {
    for (std::size_t d = begin; d < end; ++d) {
      const auto [i, sampler] = draws[d];
      SampleResult& r = outcome.samples[d];
      r.turn = plan.sequences[i].turn;
      r.token = sampler->sample(out->last(i), sample_scratch[thread]);
      r.finish = sampler->finish_reason(r.token.token);
    }
  };
  if (sampling_pool) {
    sampling_pool->parallel_for(draws.size(), body, 1, cost);
  } else {
    forward->for_each_host(draws.size(), body, cost);
  }
  outcome.sampled_ns = rt::steady_now_ns();
  outcome.compute_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

GpuWorker::GpuWorker(model::CpuForward forward, GpuWorkerConfig config) {
  auto paged = std::make_unique<backend::CpuPagedForward>(std::move(forward), config.pool);
  state_ = std::make_unique<State>(std::move(paged), std::move(config));
}
GpuWorker::GpuWorker(std::unique_ptr<backend::PagedForward> forward, GpuWorkerConfig config)
    : state_(std::make_unique<State>(std::move(forward), std::move(config))) {}
GpuWorker::GpuWorker(GpuWorker&&) noexcept = default;
GpuWorker& GpuWorker::operator=(GpuWorker&&) noexcept = default;
GpuWorker::~GpuWorker() = default;

std::shared_ptr<kv::KvPool> GpuWorker::device_pool() const { return state_->forward->host_pool(); }
const kv::KvPoolConfig& GpuWorker::pool_config() const { return state_->forward->pool_config(); }
std::shared_ptr<rt::CpuStreamPool> GpuWorker::stream_pool() const { return state_->stream_pool; }
Result<std::optional<backend::KvTierLinks>> GpuWorker::device_tier_links(std::int32_t host_slots) {
  return state_->forward->device_tier_links(host_slots);
}

asio::awaitable<void> GpuWorker::operator()(RunBatch message) {
  auto outcome = std::make_shared<BatchOutcome>();
  State* state = state_.get();
  // Shared with the stream's work item, which may outlive this frame when
  // the actor is torn down while the pass runs.
  auto plan = std::make_shared<const IterationPlan>(std::move(message.plan));
  auto ready = std::make_shared<const std::vector<rt::Event>>(std::move(message.layer_ready));
  state->stream.enqueue([state, plan, ready, outcome] { state->run(*plan, *ready, *outcome); }, "forward");
  rt::Event done = state->stream.record();
  auto executor = co_await asio::this_coro::executor;
  co_await done.wait(executor, asio::use_awaitable);
  message.reply.send(std::move(*outcome));
}

}  // namespace pensieve::actors
