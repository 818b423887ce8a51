// Recording to a file while a process runs: a recording longer than a ring
// loses nothing when it is flushed in time, what is lost is counted in the
// file, and the flushing thread writes on its own while recording goes on.
#include "runtime/trace_flusher.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <thread>

using namespace pensieve::rt;
using namespace std::chrono_literals;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::path(PENSIEVE_BINARY_DIR) / ("trace_flusher_test_" + name)).string();
}

SpanRecord numbered(std::uint64_t i) {
  return SpanRecord{SpanKind::custom, "actor", "step", i, std::int64_t(i), std::int64_t(i) + 1};
}

}  // namespace

TEST_CASE("a recording a hundred rings long loses no span when it is flushed in time") {
  Tracer tracer(64);  // one thread's ring holds 64 spans
  tracer.enable();
  const std::string path = temp_path("long.capnp");
  auto flusher = TraceFlusher::start(tracer, path, 1h);  // flushes only when asked: deterministic
  REQUIRE(flusher.has_value());
  std::uint64_t next = 0;
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < 50; ++i) tracer.record(numbered(next++));
    auto flushed = (*flusher)->flush_now();
    REQUIRE(flushed.has_value());
    REQUIRE(*flushed == 50);
  }
  // Then 100 more without a flush: the ring keeps 64, the other 36 are counted.
  for (int i = 0; i < 100; ++i) tracer.record(numbered(next++));
  auto total = (*flusher)->stop();
  REQUIRE(total.has_value());
  REQUIRE(*total == 5064);

  auto file = read_trace_file(path);
  REQUIRE(file.has_value());
  REQUIRE(file->spans.size() == 5064);
  for (std::size_t i = 0; i < file->spans.size(); ++i) REQUIRE(file->spans[i].id == i);
  REQUIRE(file->header.dropped_spans == 36);  // the last append's header wins
  REQUIRE(file->header.thread_names.size() == 1);
  std::filesystem::remove(path);
}

TEST_CASE("without flushes the same recording keeps one ring's worth and counts the rest") {
  Tracer tracer(64);
  tracer.enable();
  for (std::uint64_t i = 0; i < 5000; ++i) tracer.record(numbered(i));
  const std::string path = temp_path("unflushed.capnp");
  REQUIRE(tracer.flush_to(path).value() == 64);
  auto file = read_trace_file(path);
  REQUIRE(file.has_value());
  REQUIRE(file->header.dropped_spans == 5000 - 64);
  std::filesystem::remove(path);
}

TEST_CASE("the flushing thread appends on its own, and the file reads back while recording goes on") {
  Tracer tracer;
  tracer.enable();
  const std::string path = temp_path("periodic.capnp");
  auto flusher = TraceFlusher::start(tracer, path, 5ms);
  REQUIRE(flusher.has_value());
  tracer.record(numbered(7));
  // The thread runs on its own clock: wait for it (bounded), never sleep a guess.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while ((*flusher)->spans_written() < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  REQUIRE((*flusher)->spans_written() == 1);
  auto midway = read_trace_file(path);
  REQUIRE(midway.has_value());
  REQUIRE(midway->spans.size() == 1);
  REQUIRE(midway->spans[0].id == 7);

  tracer.record(numbered(8));
  auto total = (*flusher)->stop();
  REQUIRE(total.has_value());
  REQUIRE(*total == 2);
  REQUIRE((*flusher)->stop().value() == 2);  // idempotent
  auto file = read_trace_file(path);
  REQUIRE(file.has_value());
  REQUIRE(file->spans.size() == 2);
  REQUIRE(file->spans[1].id == 8);
  std::filesystem::remove(path);
}

TEST_CASE("a trace file that cannot be created or written is an Error, not a crash") {
  Tracer tracer;
  tracer.enable();
  auto missing_dir = TraceFlusher::start(tracer, "/nonexistent-dir/trace.capnp", 1s);
  REQUIRE(!missing_dir.has_value());
  REQUIRE(missing_dir.error().message.find("cannot create") != std::string::npos);

  auto zero = TraceFlusher::start(tracer, temp_path("zero.capnp"), 0ms);
  REQUIRE(!zero.has_value());
  REQUIRE(zero.error().message.find("interval") != std::string::npos);

  // /dev/full opens, and every write fails with ENOSPC.
  auto full = TraceFlusher::start(tracer, "/dev/full", 1h);
  REQUIRE(full.has_value());
  tracer.record(numbered(1));
  auto flushed = (*full)->flush_now();
  REQUIRE(!flushed.has_value());
  REQUIRE(flushed.error().message.find("writing /dev/full failed") != std::string::npos);
  auto stopped = (*full)->stop();
  REQUIRE(!stopped.has_value());  // the first error is what stop() reports
  REQUIRE(stopped.error().message == flushed.error().message);
}
