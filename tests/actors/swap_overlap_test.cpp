// Pipelined swap-in on the CPU backend: the GPU worker's pass of layer i
// waits only for layer i's copies, so copies of later layers overlap the
// compute of earlier ones. Proved without timing luck: the copy of the last
// layer is held until the compute of layer 0 has started; a pass that waited
// for every copy first could never get there. The trace then shows the
// same order: every compute layer starts after its own copy ended, and
// layer 0's compute starts before the last layer's copy ends.
#include "actors/gpu_worker.hpp"
#include "actors/swap_engine.hpp"
#include "gpu/model/cpu_forward.hpp"
#include "runtime/actor.hpp"
#include "runtime/executor.hpp"
#include "runtime/trace_names.hpp"
#include "tests/tiny_model.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>

using namespace pensieve;
using namespace pensieve::testing;
namespace asio = boost::asio;

namespace {

constexpr std::int32_t n_layers = 4;

struct Signal {
  std::mutex mutex;
  std::condition_variable changed;
  bool set = false;
  void raise() {
    std::lock_guard lock(mutex);
    set = true;
    changed.notify_all();
  }
  // True once raised; false if not within the bound (only against a hang).
  bool wait(std::chrono::seconds bound) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, bound, [&] { return set; });
  }
};

const rt::Span* find_span(const std::vector<rt::Span>& spans, std::string_view actor, std::string_view name,
                          std::uint64_t id) {
  auto it = std::find_if(spans.begin(), spans.end(),
                         [&](const rt::Span& s) { return s.actor == actor && s.name == name && s.id == id; });
  return it == spans.end() ? nullptr : &*it;
}

}  // namespace

TEST_CASE("swap-in of later layers overlaps compute of earlier ones, and each layer waits for its own copy",
          "[swap][overlap]") {
  auto options = tiny_model_options();
  options.n_layers = n_layers;
  auto forward = model::CpuForward::create(tiny_model(options), {.n_threads = 1});
  REQUIRE(forward.has_value());
  const kv::KvPoolConfig pool = forward->kv_pool_config(8, 4);

  rt::Tracer tracer;
  tracer.enable();
  Signal compute_started;
  bool last_copy_saw_compute = false;
  actors::GpuWorkerConfig wc{pool, {forward->config().vocab_size, {}}, &tracer, {}};
  wc.on_layer_start = [&](std::int32_t layer) {
    if (layer == 0) compute_started.raise();
  };
  actors::GpuWorker gpu(std::move(*forward), wc);

  actors::SwapEngineConfig sc;
  sc.host_slots = 4;
  sc.tracer = &tracer;
  sc.before_copy_layer = [&](std::string_view direction, std::int32_t layer) {
    if (direction == "swap_in" && layer == n_layers - 1) last_copy_saw_compute = compute_started.wait(std::chrono::seconds(30));
  };

  rt::LoopThread control, worker_thread;
  rt::TaskGroup group;
  actors::SwapEngine engine(gpu.device_pool(), gpu.stream_pool(), group, control.executor(), sc);
  // Cached KV of a 4-token prefix, in host slot 2 (values the model can
  // attend over: small and finite).
  kv::KvPool& host = engine.host_pool();
  for (std::int32_t l = 0; l < n_layers; ++l) {
    const kv::PagedKvView v = host.layer(l);
    auto* f = static_cast<float*>(v.data);
    for (std::int64_t i = 0; i < v.numel(); ++i) f[i] = 0.01f * float(i % 13);
  }
  auto swap = rt::spawn_actor<actors::SwapEngineMsg>(group, control.executor(), std::move(engine));
  auto worker = rt::spawn_actor<actors::GpuWorkerMsg>(group, worker_thread.executor(), std::move(gpu));

  auto run = [&]() -> asio::awaitable<std::string> {
    actors::IterationPlan plan;
    plan.index = 1;
    actors::PlannedSequence seq;
    seq.turn = actors::TurnId{1};
    seq.tokens = {5, 6, 7};
    seq.start_pos = 4;
    seq.blocks = {kv::BlockId{3}, kv::BlockId{6}};
    plan.sequences.push_back(seq);
    plan.transfers.swap_in = {{kv::BlockId{3}, actors::HostSlot{2}}};
    actors::SwapIteration request;
    request.iteration = 1;
    request.transfers = plan.transfers;
    auto ticket = co_await swap.ask(std::move(request));
    if (!ticket) co_return "no ticket";
    if (ticket->layer_ready.size() != std::size_t(n_layers)) co_return "wrong event count";
    actors::RunBatch batch{std::move(plan), {}, ticket->layer_ready};
    auto outcome = co_await worker.ask(std::move(batch));
    if (!outcome) co_return "no outcome";
    co_return outcome->error;
  };
  const std::string error = asio::co_spawn(control.executor(), run(), asio::use_future).get();
  CHECK(error.empty());
  auto stop = [&]() -> asio::awaitable<void> {
    co_await swap.stop(rt::StopMode::drain);
    co_await worker.stop(rt::StopMode::drain);
    co_await group.stop();
  };
  asio::co_spawn(control.executor(), stop(), asio::use_future).get();
  control.join();
  worker_thread.join();

  CHECK(last_copy_saw_compute);
  const auto spans = tracer.drain();
  for (std::int32_t l = 0; l < n_layers; ++l) {
    INFO("layer " << l);
    const rt::Span* copy = find_span(spans, rt::trace_names::copy_stream, "swap_in", std::uint64_t(l));
    const rt::Span* compute = find_span(spans, rt::trace_names::compute_stream, "layer", std::uint64_t(l));
    REQUIRE(copy != nullptr);
    REQUIRE(compute != nullptr);
    CHECK(compute->start_ns >= copy->end_ns);  // waited for its own layer
  }
  const rt::Span* last_copy = find_span(spans, rt::trace_names::copy_stream, "swap_in", n_layers - 1);
  const rt::Span* first_compute = find_span(spans, rt::trace_names::compute_stream, "layer", 0);
  CHECK(first_compute->start_ns < last_copy->end_ns);  // and did not wait for the others
}
