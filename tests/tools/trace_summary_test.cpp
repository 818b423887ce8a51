// pensieve-trace summary over the fixture run: every number is the one the
// fixture's hand-picked times give, and busy + idle = wall for every actor.
#include "tests/tools/trace_fixture.hpp"
#include "tools/pensieve-trace/cli.hpp"
#include "tools/pensieve-trace/summary.hpp"
#include "tools/pensieve-trace/trace_model.hpp"

#include <catch2/catch.hpp>

#include <boost/json/parse.hpp>

#include <filesystem>
#include <map>
#include <sstream>

namespace {

namespace tt = pensieve::tools::trace;
namespace fixture = pensieve::tests::trace_fixture;
namespace rt = pensieve::rt;

std::string fixture_path(const std::string& name) {
  const std::string path = (std::filesystem::path(PENSIEVE_BINARY_DIR) / ("trace_summary_test_" + name)).string();
  fixture::write_trace(path);
  return path;
}

}  // namespace

TEST_CASE("merged intervals count overlapping and touching time once") {
  using tt::Interval;
  const auto merged = tt::merge_intervals({{5, 9}, {0, 2}, {1, 3}, {3, 4}, {7, 8}, {10, 10}});
  CHECK(merged == std::vector<Interval>{{0, 4}, {5, 9}});
  CHECK(tt::total_ns(merged) == 8);
  CHECK(tt::overlap_ns(merged, tt::merge_intervals({{2, 6}, {8, 20}})) == 2 + 1 + 1);
  CHECK(tt::overlap_ns(merged, {}) == 0);
}

TEST_CASE("spans that overlap on one track without nesting get a second lane") {
  rt::TraceFile file;
  file.spans = {rt::Span{rt::SpanKind::message, "scheduler", "a", 0, 0, 100, 0},
                rt::Span{rt::SpanKind::message, "scheduler", "b", 0, 50, 150, 0},
                rt::Span{rt::SpanKind::message, "scheduler", "c", 0, 60, 70, 0},
                rt::Span{rt::SpanKind::message, "scheduler", "d", 0, 160, 170, 0}};
  auto trace = tt::arrange_trace(std::move(file));
  REQUIRE(trace.has_value());
  REQUIRE(trace->tracks.size() == 1);
  REQUIRE(trace->lanes.size() == 2);
  CHECK(trace->lanes[0].label == "scheduler");
  CHECK(trace->lanes[0].spans == std::vector<std::size_t>{0, 2, 3});  // c nests in a
  CHECK(trace->lanes[0].depths == std::vector<unsigned>{0, 1, 0});
  CHECK(trace->lanes[1].label == "scheduler #2");
  CHECK(trace->lanes[1].spans == std::vector<std::size_t>{1});
  const tt::Summary s = tt::summarize(*trace, 5);
  REQUIRE(s.actors.size() == 1);
  CHECK(s.actors[0].busy_ns == 160);  // [0,150) and [160,170)
  CHECK(s.actors[0].wall_ns == 170);
  CHECK(s.actors[0].idle_ns == 10);
}

TEST_CASE("a span that ends before it starts is bad input, not a negative duration") {
  rt::TraceFile file;
  file.spans = {rt::Span{rt::SpanKind::message, "x", "backwards", 0, 10, 5, 0}};
  auto trace = tt::arrange_trace(std::move(file));
  REQUIRE(!trace.has_value());
  CHECK(trace.error().message.find("ends before it starts") != std::string::npos);
}

TEST_CASE("the summary's busy and idle time add up to the wall time for every actor") {
  const std::string path = fixture_path("actors.ptrace");
  auto trace = tt::load_trace(path);
  REQUIRE(trace.has_value());
  REQUIRE(trace->spans.size() == fixture::span_count);
  const tt::Summary s = tt::summarize(*trace, 5);
  CHECK(s.span_count == fixture::span_count);
  CHECK(s.wall_ns == fixture::wall_ns);
  const std::map<std::string, std::int64_t> busy = {
      {"conversation", 4000}, {"scheduler", 2200}, {"swap engine", 500}, {"gpu worker", 6000}};
  REQUIRE(s.actors.size() == busy.size());
  const char* order[] = {"conversation", "scheduler", "swap engine", "gpu worker"};
  for (std::size_t i = 0; i < s.actors.size(); ++i) {
    const tt::ActorSummary& a = s.actors[i];
    CHECK(a.name == order[i]);
    CHECK(a.busy_ns == busy.at(a.name));
    CHECK(a.wall_ns == fixture::wall_ns);
    CHECK(a.busy_ns + a.idle_ns == a.wall_ns);
  }
  CHECK(s.actors[0].waited_messages == 1);  // the reply
  CHECK(s.actors[0].wait_total_ns == 1000);
  CHECK(s.actors[2].waited_messages == 1);  // swap in
  CHECK(s.actors[2].wait_max_ns == 300);
  CHECK(s.actors[1].waited_messages == 0);
  std::filesystem::remove(path);
}

TEST_CASE("the summary gives stream utilisation and the swap time hidden under compute exactly") {
  const std::string path = fixture_path("streams.ptrace");
  auto trace = tt::load_trace(path);
  REQUIRE(trace.has_value());
  const tt::Summary s = tt::summarize(*trace, 5);
  REQUIRE(s.streams.size() == 3);
  CHECK(s.streams[0].name == "compute");
  CHECK(!s.streams[0].swap);
  CHECK(s.streams[0].busy_ns == 5000);  // the event wait does not count
  CHECK(s.streams[0].utilisation == 5000.0 / 22000.0);
  CHECK(s.streams[1].name == "copy");
  CHECK(s.streams[1].swap);
  CHECK(s.streams[1].busy_ns == 6000);
  CHECK(s.streams[2].name == "/tmp/kv.bin");
  CHECK(s.streams[2].kind == tt::TrackKind::file);
  CHECK(s.streams[2].busy_ns == 1000);
  CHECK(s.swap_ns == 6000);
  CHECK(s.swap_hidden_ns == 2000);  // [3000,4000) and [8000,9000)
  REQUIRE(s.swap_hidden_fraction.has_value());
  CHECK(*s.swap_hidden_fraction == 2000.0 / 6000.0);
  std::filesystem::remove(path);
}

TEST_CASE("the slowest requests are split into phases that add up to their time") {
  const std::string path = fixture_path("requests.ptrace");
  auto trace = tt::load_trace(path);
  REQUIRE(trace.has_value());
  const tt::Summary s = tt::summarize(*trace, 1);
  CHECK(s.request_count == 2);
  REQUIRE(s.slowest_requests.size() == 1);
  const tt::RequestSummary& r = s.slowest_requests[0];
  CHECK(r.flow_id == 1);
  CHECK(r.start_ns == 0);
  CHECK(r.total_ns == 22000);
  // prefill, decode, swap-in (less what prefill covers), queue, network
  CHECK(r.phase_ns == std::array<std::int64_t, 5>{2000, 4000, 1500, 1500, 3000});
  CHECK(r.other_ns == 10000);
  std::int64_t sum = r.other_ns;
  for (std::int64_t p : r.phase_ns) sum += p;
  CHECK(sum == r.total_ns);

  const tt::Summary both = tt::summarize(*trace, 5);
  REQUIRE(both.slowest_requests.size() == 2);
  CHECK(both.slowest_requests[1].flow_id == 2);
  CHECK(both.slowest_requests[1].total_ns == 2000);
  CHECK(both.slowest_requests[1].phase_ns[3] == 2000);  // all queue
  std::filesystem::remove(path);
}

TEST_CASE("summary --json carries the same numbers, and the text names every actor and stream") {
  const std::string path = fixture_path("cli.ptrace");
  std::ostringstream out;
  std::ostringstream err;
  REQUIRE(tt::run_cli({"summary", path, "--json", "--top", "2"}, out, err) == 0);
  CHECK(err.str().empty());
  const boost::json::value doc = boost::json::parse(out.str());
  CHECK(doc.at("wall_ns").as_int64() == fixture::wall_ns);
  CHECK(doc.at("swap_hidden_ns").as_int64() == 2000);
  CHECK(doc.at("swap_hidden_fraction").as_double() == 2000.0 / 6000.0);
  const auto& actors = doc.at("actors").as_array();
  REQUIRE(actors.size() == 4);
  for (const auto& a : actors) {
    CHECK(a.at("busy_ns").as_int64() + a.at("idle_ns").as_int64() == a.at("wall_ns").as_int64());
  }
  const auto& slowest = doc.at("slowest_requests").as_array();
  REQUIRE(slowest.size() == 2);
  CHECK(slowest[0].at("phases_ns").at("decode").as_int64() == 4000);
  CHECK(slowest[0].at("phases_ns").at("other").as_int64() == 10000);

  std::ostringstream text;
  REQUIRE(tt::run_cli({"summary", path}, text, err) == 0);
  for (const char* name : {"conversation", "scheduler", "swap engine", "gpu worker", "compute", "copy (swap)",
                           "/tmp/kv.bin (file)", "swap hidden under compute: 33.3%"}) {
    CHECK(text.str().find(name) != std::string::npos);
  }
  std::filesystem::remove(path);
}
