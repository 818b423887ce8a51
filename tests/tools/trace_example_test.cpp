// The synthetic serving run that tools/trace-example.svg pictures: its
// summary adds up, and the test leaves it in <build>/trace-example.ptrace for
// `pensieve-trace render` (see tools/README.md).
// Four requests through the serving actors: the scheduler batches them in
// 4 ms iterations, the GPU worker runs each batch as per-layer kernels on the
// compute stream while the copy stream swaps request 3's KV blocks back in.
#include "runtime/trace.hpp"
#include "runtime/trace_names.hpp"
#include "tools/pensieve-trace/summary.hpp"
#include "tools/pensieve-trace/trace_model.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

namespace {

namespace rt = pensieve::rt;
namespace names = rt::trace_names;
using K = rt::SpanKind;

constexpr std::int64_t base_ns = 1'000'000'000;
constexpr std::int64_t us = 1000;

void span(rt::Tracer& t, K kind, std::string_view actor, std::string_view name, double from_us, double to_us,
          std::uint64_t flow = 0, std::string_view detail = {}, double sent_us = -1) {
  const auto at = [](double u) { return base_ns + static_cast<std::int64_t>(u * us); };
  t.record(rt::SpanRecord{kind, actor, name, flow, at(from_us), at(to_us), flow, sent_us < 0 ? 0 : at(sent_us),
                          detail});
}

// One 4-layer forward pass of a batch on the compute stream.
void forward(rt::Tracer& t, double from_us, double layer_us, std::string_view detail) {
  span(t, K::message, names::gpu_worker, "forward", from_us, from_us + 4 * layer_us + 60, 0, detail, from_us - 40);
  for (int layer = 0; layer < 4; ++layer) {
    const double at = from_us + 30 + layer * layer_us;
    span(t, K::stream, names::compute_stream, "attention", at, at + layer_us * 0.45);
    span(t, K::stream, names::compute_stream, "mlp", at + layer_us * 0.45, at + layer_us * 0.95);
  }
  span(t, K::stream, names::compute_stream, "sample", from_us + 30 + 4 * layer_us, from_us + 4 * layer_us + 55);
}

void record_example(rt::Tracer& t) {
  // Requests 1 and 2 arrive together; 3 (an old conversation, its KV on disk) and 4 later.
  struct Request {
    std::uint64_t id;
    double arrive_us;
    double admitted_us;
    double prefill_end_us;
    double done_us;
  };
  const Request requests[] = {{1, 100, 400, 4400, 16400}, {2, 250, 400, 4400, 12400},
                              {3, 3000, 8400, 12400, 20400}, {4, 9000, 12400, 16400, 24400}};
  for (const Request& r : requests) {
    span(t, K::message, names::http, "chat request", r.arrive_us - 80, r.arrive_us, r.id);
    span(t, K::message, names::conversation, "turn", r.arrive_us, r.arrive_us + 150, r.id, {}, r.arrive_us - 10);
    span(t, K::message, names::scheduler, "admit", r.arrive_us + 160, r.arrive_us + 200, r.id, {}, r.arrive_us + 150);
    span(t, K::request, names::conversation, names::phase_queue, r.arrive_us, r.admitted_us, r.id);
    span(t, K::request, names::conversation, names::phase_prefill, r.admitted_us, r.prefill_end_us, r.id);
    span(t, K::request, names::conversation, names::phase_decode, r.prefill_end_us, r.done_us, r.id);
    span(t, K::request, names::conversation, names::phase_network, r.done_us, r.done_us + 300, r.id);
    span(t, K::message, names::conversation, "reply", r.done_us + 20, r.done_us + 300, r.id, {}, r.done_us);
  }
  // Request 3's KV comes back from disk (the swap engine) then to the GPU (copy stream).
  span(t, K::request, names::conversation, names::phase_swap_in, 3250, 8400, 3);
  span(t, K::message, names::swap_engine, "swap in", 3300, 3500, 3, "blocks=96", 3250);
  span(t, K::file_io, "kv-tier.bin", "read", 3500, 6200, 3);
  span(t, K::message, names::swap_engine, "read done", 6200, 6300, 3, {}, 6200);
  for (int layer = 0; layer < 4; ++layer) {
    span(t, K::stream, names::copy_stream, "swap-in layer", 6400 + layer * 480, 6400 + layer * 480 + 450, 3);
  }
  // Scheduler iterations every 4 ms, each a batch on the GPU worker.
  const char* batches[] = {"prefill=2x512",           "decode=2",  "prefill=1x768 decode=2", "prefill=1x512 decode=2",
                           "decode=3",                "decode=2"};
  for (int i = 0; i < 6; ++i) {
    const double at = 400 + i * 4000;
    span(t, K::iteration, names::scheduler, "step", at, at + 180, 0, batches[i]);
    forward(t, at + 220, 800 + (i % 2) * 100, batches[i]);
  }
}

}  // namespace

TEST_CASE("the example serving run's summary adds up for every actor and request", "[example]") {
  rt::Tracer tracer;
  tracer.enable();
  tracer.name_this_thread("example");
  record_example(tracer);
  const std::string path = (std::filesystem::path(PENSIEVE_BINARY_DIR) / "trace-example.ptrace").string();
  REQUIRE(tracer.flush_to(path).value() == 106);
  auto trace = pensieve::tools::trace::load_trace(path);
  REQUIRE(trace.has_value());
  CHECK(trace->lanes.size() == 8);  // five actors, two streams, one file
  CHECK(trace->wall_ns() == 24680 * us);
  const auto summary = pensieve::tools::trace::summarize(*trace, 10);
  for (const auto& actor : summary.actors) CHECK(actor.busy_ns + actor.idle_ns == actor.wall_ns);
  REQUIRE(summary.request_count == 4);
  CHECK(summary.slowest_requests.front().flow_id == 3);  // the one swapped in from disk
  for (const auto& r : summary.slowest_requests) {
    std::int64_t sum = r.other_ns;
    for (std::int64_t p : r.phase_ns) sum += p;
    CHECK(sum == r.total_ns);
  }
  // The copy stream's four layers (1.8 ms) run under the second forward pass
  // but for 130 µs: three 45 µs gaps between layers, of which 45 + 25 + 45 fall
  // in a copy, and the 15 µs after the last kernel.
  CHECK(summary.swap_ns == 1800 * us);
  CHECK(summary.swap_hidden_ns == 1670 * us);
}
