// Cost of recording a trace span: enabled (target < 50 ns, two clock reads
// included), disabled, and with no tracer at all.
#include "runtime/trace.hpp"

#include <benchmark/benchmark.h>

namespace {

using pensieve::rt::SpanKind;
using pensieve::rt::SpanRecord;
using pensieve::rt::TraceSpan;
using pensieve::rt::Tracer;

constexpr std::size_t ring_spans = std::size_t{1} << 16;

// Drains the ring (untimed) before it fills, so every timed span is stored,
// not dropped.
void drain_if_full(benchmark::State& state, Tracer& tracer, std::size_t& recorded) {
  if (++recorded % ring_spans == 0) {
    state.PauseTiming();
    benchmark::DoNotOptimize(tracer.drain());
    state.ResumeTiming();
  }
}

void BM_TraceSpanEnabled(benchmark::State& state) {
  Tracer tracer(ring_spans);
  tracer.enable();
  std::size_t recorded = 0;
  std::uint64_t id = 0;
  for (auto _ : state) {
    { TraceSpan span(&tracer, SpanKind::message, "bench_actor", "tick", ++id); }
    drain_if_full(state, tracer, recorded);
  }
  if (tracer.dropped() != 0) state.SkipWithError("spans were dropped");
}
BENCHMARK(BM_TraceSpanEnabled);

void BM_TraceRecordEnabled(benchmark::State& state) {  // record() alone, no clock reads
  Tracer tracer(ring_spans);
  tracer.enable();
  std::size_t recorded = 0;
  SpanRecord record{SpanKind::stream, "copy", "layer", 0, 1, 2};
  for (auto _ : state) {
    ++record.id;
    tracer.record(record);
    drain_if_full(state, tracer, recorded);
  }
  if (tracer.dropped() != 0) state.SkipWithError("spans were dropped");
}
BENCHMARK(BM_TraceRecordEnabled);

void BM_TraceSpanDisabled(benchmark::State& state) {
  Tracer tracer(ring_spans);
  std::uint64_t id = 0;
  for (auto _ : state) {
    TraceSpan span(&tracer, SpanKind::message, "bench_actor", "tick", ++id);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_TraceSpanDisabled);

void BM_TraceSpanNoTracer(benchmark::State& state) {
  Tracer* none = nullptr;
  benchmark::DoNotOptimize(none);
  for (auto _ : state) {
    TraceSpan span(none, SpanKind::message, "bench_actor", "tick");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_TraceSpanNoTracer);

}  // namespace
