#pragma once
// A small traced run, recorded through a real Tracer from four threads with
// hand-picked times, so that every number pensieve-trace derives from it is
// known exactly. Times are ns after `base_ns`; request 1 crosses every actor.
//
//   conversation  turn[0,1000) ⊃ tokenize[200,500), turn[5000,6000) (request 2),
//                 reply[20000,22000) sent at 19000 (waited 1000)
//   scheduler     admit[900,1000), step[1000,3000) "prefill=1x512", admit[6000,6100) (request 2)
//   swap engine   swap in[1500,2000) sent at 1200 (waited 300)
//   gpu worker    forward[3000,9000)
//   compute       gemm[3000,5000), gemm[6000,9000), wait_event[9000,11000) (not busy)
//   copy          swap-in layer 0[2000,4000) (request 1), layer 1[8000,12000)
//   /tmp/kv.bin   read[10000,11000)
//   request 1     arrival@0, queue[0,1500), swap-in[1500,4000), prefill[3000,5000),
//                 decode[5000,9000), network[9000,12000), done@22000
//   request 2     queue[5000,7000)
#include "runtime/trace.hpp"
#include "runtime/trace_names.hpp"

#include <latch>
#include <string>
#include <thread>
#include <vector>

namespace pensieve::tests::trace_fixture {

namespace rt = pensieve::rt;
namespace names = rt::trace_names;

inline constexpr std::int64_t base_ns = 1'000'000'000;
inline constexpr std::int64_t wall_ns = 22000;

inline rt::SpanRecord span(rt::SpanKind kind, std::string_view actor, std::string_view name, std::int64_t from,
                           std::int64_t to, std::uint64_t flow = 0, std::int64_t sent = -1,
                           std::string_view detail = {}) {
  return rt::SpanRecord{kind,          actor, name, 0, base_ns + from, base_ns + to, flow,
                        sent < 0 ? 0 : base_ns + sent, detail};
}

inline void record_conversation(rt::Tracer& t) {
  using K = rt::SpanKind;
  t.name_this_thread("conversation loop");
  t.record(span(K::message, names::conversation, "turn", 0, 1000, 1));
  t.record(span(K::custom, names::conversation, "tokenize", 200, 500, 1));
  t.record(span(K::message, names::conversation, "turn", 5000, 6000, 2));
  t.record(span(K::message, names::conversation, "reply", 20000, 22000, 1, 19000));
  t.record(span(K::request, names::conversation, names::request_arrival, 0, 0, 1));
  t.record(span(K::request, names::conversation, names::phase_queue, 0, 1500, 1));
  t.record(span(K::request, names::conversation, names::phase_swap_in, 1500, 4000, 1));
  t.record(span(K::request, names::conversation, names::phase_prefill, 3000, 5000, 1));
  t.record(span(K::request, names::conversation, names::phase_decode, 5000, 9000, 1));
  t.record(span(K::request, names::conversation, names::phase_network, 9000, 12000, 1));
  t.record(span(K::request, names::conversation, names::request_done, 22000, 22000, 1));
  t.record(span(K::request, names::conversation, names::phase_queue, 5000, 7000, 2));
}

inline void record_scheduler(rt::Tracer& t) {
  using K = rt::SpanKind;
  t.name_this_thread("scheduler loop");
  t.record(span(K::message, names::scheduler, "admit", 900, 1000, 1));
  t.record(span(K::iteration, names::scheduler, "step", 1000, 3000, 0, -1, "prefill=1x512"));
  t.record(span(K::message, names::scheduler, "admit", 6000, 6100, 2));
}

inline void record_gpu(rt::Tracer& t) {
  using K = rt::SpanKind;
  t.name_this_thread("gpu worker loop");
  t.record(span(K::message, names::gpu_worker, "forward", 3000, 9000, 1));
  t.record(span(K::stream, names::compute_stream, "gemm", 3000, 5000));
  t.record(span(K::stream, names::compute_stream, "gemm", 6000, 9000));
  t.record(span(K::stream, names::compute_stream, names::stream_wait, 9000, 11000));
  t.record(span(K::stream, names::copy_stream, "swap-in layer 0", 2000, 4000, 1));
  t.record(span(K::stream, names::copy_stream, "swap-in layer 1", 8000, 12000));
}

inline void record_swap(rt::Tracer& t) {
  using K = rt::SpanKind;
  t.name_this_thread("swap loop");
  t.record(span(K::message, names::swap_engine, "swap in", 1500, 2000, 1, 1200));
  t.record(span(K::file_io, "/tmp/kv.bin", "read", 10000, 11000));
}

// Records the run on four threads, all alive at once (so each gets its own
// ring), and writes it to `path`.
inline void write_trace(const std::string& path) {
  rt::Tracer tracer;
  tracer.enable();
  std::latch all_recorded(4);
  std::vector<std::thread> threads;
  for (auto* record : {&record_conversation, &record_scheduler, &record_gpu, &record_swap}) {
    threads.emplace_back([&tracer, &all_recorded, record] {
      record(tracer);
      all_recorded.arrive_and_wait();
    });
  }
  for (auto& th : threads) th.join();
  (void)tracer.flush_to(path).value();
}

inline constexpr std::size_t span_count = 12 + 3 + 6 + 2;
inline constexpr std::size_t request_span_count = 8;

}  // namespace pensieve::tests::trace_fixture
