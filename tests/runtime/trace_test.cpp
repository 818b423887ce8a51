// Trace spans: off records nothing; on records every span with its thread,
// sane times, and survives a round trip through the Cap'n Proto file.
#include "runtime/trace.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

using namespace pensieve::rt;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::path(PENSIEVE_BINARY_DIR) / ("trace_test_" + name)).string();
}

}  // namespace

TEST_CASE("a disabled tracer records nothing") {
  Tracer tracer;
  REQUIRE(!tracer.enabled());
  {
    TraceSpan span(&tracer, SpanKind::message, "actor", "ping", 1);
  }
  tracer.record(SpanRecord{SpanKind::custom, "a", "b", 0, 1, 2});
  TraceSpan no_tracer(nullptr, SpanKind::message, "actor", "ping");
  REQUIRE(tracer.drain().empty());
  REQUIRE(tracer.thread_count() == 0);
  REQUIRE(tracer.dropped() == 0);
}

TEST_CASE("an enabled tracer records spans from several threads with sane times and thread indices") {
  Tracer tracer;
  tracer.enable();
  constexpr int threads = 4;
  constexpr int per_thread = 1000;
  const std::int64_t before_ns = steady_now_ns();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&tracer, t] {
      for (int i = 0; i < per_thread; ++i) {
        TraceSpan span(&tracer, SpanKind::message, "worker", "tick",
                       static_cast<std::uint64_t>(t) * per_thread + i);
      }
    });
  }
  for (auto& w : workers) w.join();
  const std::int64_t after_ns = steady_now_ns();

  const std::vector<Span> spans = tracer.drain();
  REQUIRE(spans.size() == threads * per_thread);
  REQUIRE(tracer.thread_count() == threads);
  std::map<std::uint32_t, std::vector<std::uint64_t>> ids_by_thread;
  for (const Span& s : spans) {
    REQUIRE(s.kind == SpanKind::message);
    REQUIRE(s.actor == "worker");
    REQUIRE(s.name == "tick");
    REQUIRE(before_ns <= s.start_ns);
    REQUIRE(s.start_ns <= s.end_ns);
    REQUIRE(s.end_ns <= after_ns);
    ids_by_thread[s.thread].push_back(s.id);
  }
  REQUIRE(ids_by_thread.size() == threads);
  for (const auto& [thread, ids] : ids_by_thread) {
    REQUIRE(thread < threads);
    REQUIRE(ids.size() == per_thread);
    // One thread's spans come back in recording order, with its own ids.
    const std::uint64_t first = ids.front();
    REQUIRE(first % per_thread == 0);
    for (int i = 0; i < per_thread; ++i) REQUIRE(ids[i] == first + i);
  }
  REQUIRE(tracer.drain().empty());  // draining moves the spans out
}

TEST_CASE("draining while threads record loses and duplicates nothing") {
  Tracer tracer(256);
  tracer.enable();
  constexpr int threads = 3;
  constexpr int per_thread = 20000;
  std::atomic<int> finished{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (int i = 0; i < per_thread; ++i) {
        tracer.record(SpanRecord{SpanKind::custom, "w", "x", static_cast<std::uint64_t>(i), i, i});
      }
      finished.fetch_add(1);
    });
  }
  std::vector<Span> all;
  while (finished.load() < threads) {
    auto part = tracer.drain();
    all.insert(all.end(), part.begin(), part.end());
  }
  for (auto& w : workers) w.join();
  auto rest = tracer.drain();
  all.insert(all.end(), rest.begin(), rest.end());
  // Every span is either collected or counted as dropped, never both.
  REQUIRE(all.size() + tracer.dropped() == std::size_t{threads} * per_thread);
  std::map<std::uint32_t, std::uint64_t> last_id;
  for (const Span& s : all) {
    auto it = last_id.find(s.thread);
    if (it != last_id.end()) REQUIRE(s.id > it->second);  // per thread: increasing, no repeats
    last_id[s.thread] = s.id;
  }
}

TEST_CASE("a full ring drops new spans and counts them") {
  Tracer tracer(4);
  tracer.enable();
  for (std::uint64_t i = 0; i < 10; ++i) tracer.record(SpanRecord{SpanKind::custom, "a", "b", i, 0, 0});
  const auto spans = tracer.drain();
  REQUIRE(spans.size() == 4);
  for (std::uint64_t i = 0; i < 4; ++i) REQUIRE(spans[i].id == i);
  REQUIRE(tracer.dropped() == 6);
  tracer.record(SpanRecord{SpanKind::custom, "a", "b", 99, 0, 0});  // room again after the drain
  REQUIRE(tracer.drain().size() == 1);
}

TEST_CASE("interned names outlive the strings they were made from") {
  Tracer tracer;
  tracer.enable();
  std::string_view name;
  {
    std::string temporary = "conversation-17";
    name = tracer.intern(temporary);
    REQUIRE(tracer.intern(temporary).data() == name.data());
  }
  tracer.record(SpanRecord{SpanKind::request, name, "turn", 17, 5, 9});
  const auto spans = tracer.drain();
  REQUIRE(spans.size() == 1);
  REQUIRE(spans[0].actor == "conversation-17");
}

TEST_CASE("a trace file round-trips every span through Cap'n Proto") {
  Tracer tracer(1 << 16);
  tracer.enable();
  constexpr int count = 40000;  // more than one chunk of the file
  std::vector<Span> expected;
  const SpanKind kinds[] = {SpanKind::message, SpanKind::stream,  SpanKind::file_io,
                            SpanKind::iteration, SpanKind::request, SpanKind::custom};
  const char* names[] = {"ping", "layer", "read", "step", "turn", "x"};
  for (int i = 0; i < count; ++i) {
    const SpanRecord r{kinds[i % 6], "actor", names[i % 6], std::uint64_t{1} << 40 | i,
                       -5 + i, 1000000000000 + i};
    tracer.record(r);
    expected.push_back(Span{r.kind, "actor", names[i % 6], r.id, r.start_ns, r.end_ns, 0});
  }
  const std::string path = temp_path("roundtrip.capnp");
  auto written = tracer.flush_to(path);
  REQUIRE(written.has_value());
  REQUIRE(*written == count);
  auto read = read_trace(path);
  REQUIRE(read.has_value());
  REQUIRE(read->size() == expected.size());
  REQUIRE(*read == expected);

  // A flush drains: the next file holds only what was recorded since.
  tracer.record(SpanRecord{SpanKind::custom, "late", "span", 1, 2, 3});
  REQUIRE(tracer.flush_to(path).value() == 1);
  auto second = read_trace(path);
  REQUIRE(second.has_value());
  REQUIRE(second->size() == 1);
  REQUIRE((*second)[0] == Span{SpanKind::custom, "late", "span", 1, 2, 3, 0});
  std::filesystem::remove(path);
}

TEST_CASE("an empty trace file reads back as no spans") {
  Tracer tracer;
  const std::string path = temp_path("empty.capnp");
  REQUIRE(tracer.flush_to(path).value() == 0);
  auto read = read_trace(path);
  REQUIRE(read.has_value());
  REQUIRE(read->empty());
  std::filesystem::remove(path);
}

TEST_CASE("reading a missing or corrupt trace file is an Error") {
  auto missing = read_trace(temp_path("does-not-exist.capnp"));
  REQUIRE(!missing.has_value());
  REQUIRE(missing.error().message.find("No such file") != std::string::npos);

  const std::string path = temp_path("corrupt.capnp");
  {
    std::ofstream out(path, std::ios::binary);
    out << "this is not a capnp message at all, just some text";
  }
  auto corrupt = read_trace(path);
  REQUIRE(!corrupt.has_value());
  REQUIRE(corrupt.error().message.find("not a valid trace file") != std::string::npos);
  std::filesystem::remove(path);

  Tracer tracer;
  auto unwritable = tracer.flush_to("/nonexistent-dir/trace.capnp");
  REQUIRE(!unwritable.has_value());
  REQUIRE(unwritable.error().message.find("cannot create") != std::string::npos);
}
