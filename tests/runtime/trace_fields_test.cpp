// What a span carries besides its name and times (flow id, detail, send
// time) and the trace file's header survive the ring and the file.
#include "runtime/trace.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <latch>
#include <string>
#include <thread>

using namespace pensieve::rt;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::path(PENSIEVE_BINARY_DIR) / ("trace_fields_test_" + name)).string();
}

std::int64_t wall_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

TEST_CASE("a span's flow id, detail and send time survive the ring and the file") {
  Tracer tracer;
  tracer.enable();
  {
    std::string detail = "prefill=3x512 decode=14";  // gone before the drain
    tracer.record(SpanRecord{SpanKind::iteration, "scheduler", "step", 7, 100, 200, 42, 90, detail});
    detail.assign(detail.size(), 'x');
  }
  const std::string long_detail(max_detail_chars + 10, 'd');
  tracer.record(SpanRecord{SpanKind::custom, "a", "long", 0, 1, 2, 0, 0, long_detail});
  tracer.record(SpanRecord{SpanKind::custom, "a", "plain", 0, 3, 4});

  const std::string path = temp_path("fields.capnp");
  REQUIRE(tracer.flush_to(path).value() == 3);
  auto file = read_trace_file(path);
  REQUIRE(file.has_value());
  REQUIRE(file->spans.size() == 3);
  CHECK(file->spans[0] ==
        Span{SpanKind::iteration, "scheduler", "step", 7, 100, 200, 0, 42, "prefill=3x512 decode=14", 90});
  CHECK(file->spans[1].detail == std::string(max_detail_chars, 'd'));  // cut, not lost
  CHECK(file->spans[2] == Span{SpanKind::custom, "a", "plain", 0, 3, 4, 0});
  std::filesystem::remove(path);
}

TEST_CASE("a TraceSpan converts its send time, flow id and detail like its own times") {
  Tracer tracer;
  tracer.enable();
  const std::int64_t before_ns = steady_now_ns();
  const std::uint64_t sent_ticks = cpu_ticks();
  {
    TraceSpan span(&tracer, SpanKind::message, "conversation", "turn", 5);
    REQUIRE(span.recording());
    span.set_enqueue_ticks(sent_ticks);
    span.set_flow_id(99);
    span.set_detail("tokens=12");
  }
  const std::int64_t after_ns = steady_now_ns();
  const auto spans = tracer.drain();
  REQUIRE(spans.size() == 1);
  const Span& s = spans[0];
  CHECK(s.flow_id == 99);
  CHECK(s.detail == "tokens=12");
  CHECK(before_ns <= s.enqueue_ns);
  CHECK(s.enqueue_ns <= s.start_ns);
  CHECK(s.end_ns <= after_ns);

  Tracer off;
  TraceSpan not_recording(&off, SpanKind::message, "a", "b");
  CHECK(!not_recording.recording());
}

TEST_CASE("a span without a send time reads back as unknown, not as time zero converted") {
  Tracer tracer;
  tracer.enable();
  { TraceSpan span(&tracer, SpanKind::message, "a", "b"); }
  const auto spans = tracer.drain();
  REQUIRE(spans.size() == 1);
  CHECK(spans[0].enqueue_ns == 0);
}

TEST_CASE("a trace file's header names the recording threads and maps its times to the wall clock") {
  Tracer tracer(4);
  const std::int64_t before_enable_ns = steady_now_ns();
  tracer.enable();
  const std::int64_t after_enable_ns = steady_now_ns();
  tracer.name_this_thread("main");
  // Both threads stay alive until both recorded: a thread id may be reused
  // once its thread ended, and the tracer would hand its ring on.
  std::latch worker_recorded(1);
  std::latch both_recorded(2);
  std::thread worker([&] {
    tracer.name_this_thread("gpu worker");
    for (int i = 0; i < 6; ++i) tracer.record(SpanRecord{SpanKind::custom, "w", "x", 0, 1, 2});
    worker_recorded.count_down();
    both_recorded.arrive_and_wait();
  });
  std::thread unnamed([&] {
    worker_recorded.wait();
    tracer.record(SpanRecord{SpanKind::custom, "u", "x", 0, 1, 2});
    both_recorded.arrive_and_wait();
  });
  worker.join();
  unnamed.join();

  const std::string path = temp_path("header.capnp");
  const std::int64_t wall_before_ns = wall_now_ns();
  REQUIRE(tracer.flush_to(path).value() == 5);  // 4 of the worker's 6 fit its ring
  const std::int64_t wall_after_ns = wall_now_ns();
  auto file = read_trace_file(path);
  REQUIRE(file.has_value());
  const TraceHeader& h = file->header;
  CHECK(h.thread_names == std::vector<std::string>{"main", "gpu worker", ""});
  CHECK(h.dropped_spans == 2);
  CHECK(before_enable_ns <= h.start_steady_ns);
  CHECK(h.start_steady_ns <= after_enable_ns);
  CHECK(after_enable_ns <= h.clock_steady_ns);
  CHECK(wall_before_ns <= h.clock_wall_ns);
  CHECK(h.clock_wall_ns <= wall_after_ns);
  for (const Span& s : file->spans) CHECK(s.thread == (s.actor == "w" ? 1u : 2u));
  std::filesystem::remove(path);
}

TEST_CASE("an empty trace file still carries its header") {
  Tracer tracer;
  tracer.name_this_thread("loop");
  const std::string path = temp_path("empty-header.capnp");
  REQUIRE(tracer.flush_to(path).value() == 0);
  auto file = read_trace_file(path);
  REQUIRE(file.has_value());
  CHECK(file->spans.empty());
  CHECK(file->header.thread_names == std::vector<std::string>{"loop"});
  CHECK(file->header.start_steady_ns == 0);  // never enabled
  std::filesystem::remove(path);
}

TEST_CASE("a trace file whose chunk claims more words than the file holds is refused, not allocated") {
  const std::string path = temp_path("forged.capnp");
  {
    // A stream frame header: one segment of 2^31 - 1 words, then a few bytes.
    const unsigned char frame[] = {0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4, 5, 6, 7, 8};
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(frame), sizeof frame);
  }
  auto file = read_trace_file(path);
  REQUIRE(!file.has_value());
  CHECK(file.error().message.find("not a valid trace file") != std::string::npos);
  CHECK(file.error().message.find("too large") != std::string::npos);
  std::filesystem::remove(path);
}
