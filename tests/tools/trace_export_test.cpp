// pensieve-trace export and render over the fixture run: the JSON parses,
// has one named track per actor, stream and file, and flow arrows that pair
// up along each request; the SVG parses as XML with one lane per track.
#include "tests/tools/trace_fixture.hpp"
#include "tools/pensieve-trace/cli.hpp"

#include <catch2/catch.hpp>

#include <boost/json/parse.hpp>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace {

namespace tt = pensieve::tools::trace;
namespace fixture = pensieve::tests::trace_fixture;
namespace json = boost::json;
namespace pt = boost::property_tree;

std::string temp_path(const std::string& name) {
  return (std::filesystem::path(PENSIEVE_BINARY_DIR) / ("trace_export_test_" + name)).string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

json::value export_fixture() {
  const std::string trace = temp_path("fixture.ptrace");
  const std::string out_path = temp_path("fixture.json");
  fixture::write_trace(trace);
  std::ostringstream out;
  std::ostringstream err;
  REQUIRE(tt::run_cli({"export", trace, "-o", out_path}, out, err) == 0);
  CHECK(err.str().empty());
  json::value doc = json::parse(read_file(out_path));
  std::filesystem::remove(trace);
  std::filesystem::remove(out_path);
  return doc;
}

// Every element named `name` anywhere under `tree`.
void collect(const pt::ptree& tree, const std::string& name, std::vector<const pt::ptree*>& out) {
  for (const auto& [key, child] : tree) {
    if (key == name) out.push_back(&child);
    collect(child, name, out);
  }
}

// The SVG's rows: each group's class and label, and its span rectangles.
struct Row {
  std::string kind;   // "lane" or "request"
  std::string label;  // data-track or data-request
  std::size_t spans = 0;
};

std::vector<Row> rows_of(const std::string& svg_path) {
  pt::ptree doc;
  pt::read_xml(svg_path, doc);
  std::vector<const pt::ptree*> groups;
  collect(doc.get_child("svg"), "g", groups);
  std::vector<Row> rows;
  for (const pt::ptree* g : groups) {
    Row row{g->get<std::string>("<xmlattr>.class", ""), "", 0};
    if (row.kind == "lane") row.label = g->get<std::string>("<xmlattr>.data-track");
    if (row.kind == "request") row.label = g->get<std::string>("<xmlattr>.data-request");
    if (row.label.empty()) continue;
    for (const auto& [key, child] : *g) {
      if (key == "rect" && child.get<std::string>("<xmlattr>.class", "") == "span") ++row.spans;
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST_CASE("export names one track per actor, stream and file") {
  const json::value doc = export_fixture();
  std::map<std::int64_t, std::string> track_names;
  for (const auto& e : doc.at("traceEvents").as_array()) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") {
      track_names[e.at("tid").as_int64()] = std::string(e.at("args").at("name").as_string());
    }
  }
  const std::map<std::int64_t, std::string> expected = {
      {1, "conversation"},   {2, "scheduler"},    {3, "swap engine"},       {4, "gpu worker"},
      {5, "stream: compute"}, {6, "stream: copy"}, {7, "file: /tmp/kv.bin"}};
  CHECK(track_names == expected);
}

TEST_CASE("export writes each span as a complete event in µs with its details") {
  const json::value doc = export_fixture();
  std::size_t complete = 0;
  std::size_t async_begin = 0;
  std::size_t async_end = 0;
  std::size_t points = 0;
  for (const auto& e : doc.at("traceEvents").as_array()) {
    const auto& ph = e.at("ph").as_string();
    if (ph == "X") {
      ++complete;
      if (e.at("name") == "reply") {
        CHECK(e.at("ts").to_number<double>() == 20.0);
        CHECK(e.at("dur").to_number<double>() == 2.0);
        CHECK(e.at("tid").as_int64() == 1);
        CHECK(e.at("args").at("mailbox_wait_us").to_number<double>() == 1.0);
        CHECK(e.at("args").at("request").to_number<std::uint64_t>() == 1);
      }
      if (e.at("name") == "step") CHECK(e.at("args").at("detail") == "prefill=1x512");
    }
    if (ph == "b") ++async_begin;
    if (ph == "e") ++async_end;
    if (ph == "n") ++points;
  }
  CHECK(complete == fixture::span_count - fixture::request_span_count);
  CHECK(async_begin == 6);  // request phases
  CHECK(async_end == 6);
  CHECK(points == 2);  // arrival, done
}

TEST_CASE("export links a request's spans across actors with flow events that pair up") {
  const json::value doc = export_fixture();
  struct End {
    double ts = -1;
    std::int64_t tid = 0;
    std::uint64_t request = 0;
  };
  std::map<std::uint64_t, End> starts;
  std::map<std::uint64_t, End> finishes;
  for (const auto& e : doc.at("traceEvents").as_array()) {
    const auto& ph = e.at("ph").as_string();
    if (ph != "s" && ph != "f") continue;
    auto& side = ph == "s" ? starts : finishes;
    const std::uint64_t id = e.at("id").to_number<std::uint64_t>();
    CHECK(!side.contains(id));  // one start and one finish per arrow
    side[id] = End{e.at("ts").to_number<double>(), e.at("tid").as_int64(), e.at("args").at("request").to_number<std::uint64_t>()};
  }
  // Request 1: turn, tokenize, admit, swap in, copy layer 0, forward, reply; request 2: turn, admit.
  REQUIRE(starts.size() == 7);
  REQUIRE(finishes.size() == 7);
  std::set<std::int64_t> request_one_tracks;
  for (const auto& [id, s] : starts) {
    REQUIRE(finishes.contains(id));
    const End& f = finishes.at(id);
    CHECK(s.request == f.request);
    CHECK(s.ts <= f.ts);
    if (s.request == 1) {
      request_one_tracks.insert(s.tid);
      request_one_tracks.insert(f.tid);
    }
  }
  // conversation, scheduler, swap engine, gpu worker, copy stream
  CHECK(request_one_tracks == std::set<std::int64_t>{1, 2, 3, 4, 6});
}

TEST_CASE("render draws an SVG that parses as XML with one lane per track") {
  const std::string trace = temp_path("render.ptrace");
  const std::string svg_path = temp_path("render.svg");
  fixture::write_trace(trace);
  std::ostringstream out;
  std::ostringstream err;
  REQUIRE(tt::run_cli({"render", trace, "-o", svg_path}, out, err) == 0);
  std::vector<Row> rows;
  REQUIRE_NOTHROW(rows = rows_of(svg_path));
  std::vector<std::string> lanes;
  std::size_t lane_spans = 0;
  std::map<std::string, std::size_t> request_phases;
  for (const Row& r : rows) {
    if (r.kind == "lane") {
      lanes.push_back(r.label);
      lane_spans += r.spans;
    } else {
      request_phases[r.label] = r.spans;
    }
  }
  CHECK(lanes == std::vector<std::string>{"conversation", "scheduler", "swap engine", "gpu worker", "compute",
                                          "copy", "/tmp/kv.bin"});
  CHECK(lane_spans == fixture::span_count - fixture::request_span_count);
  // Below the lanes, one row per request with its phases (points are not drawn).
  CHECK(request_phases == std::map<std::string, std::size_t>{{"1", 5}, {"2", 1}});

  // A window shows only what overlaps it: [0, 800 ns] holds turn and tokenize
  // on the lanes and request 1's queue below them.
  REQUIRE(tt::run_cli({"render", trace, "-o", svg_path, "--from-ms", "0", "--to-ms", "0.0008"}, out, err) == 0);
  std::size_t in_window = 0;
  std::vector<std::string> requests;
  for (const Row& r : rows_of(svg_path)) {
    if (r.kind == "lane") in_window += r.spans;
    if (r.kind == "request") requests.push_back(r.label + ":" + std::to_string(r.spans));
  }
  CHECK(in_window == 2);
  CHECK(requests == std::vector<std::string>{"1:1"});
  std::filesystem::remove(trace);
  std::filesystem::remove(svg_path);
}

TEST_CASE("a truncated, foreign or missing trace file is a clear error with exit code 1") {
  const std::string good = temp_path("good.ptrace");
  fixture::write_trace(good);
  const std::string whole = read_file(good);
  const std::string truncated = temp_path("truncated.ptrace");
  {
    std::ofstream out(truncated, std::ios::binary);
    out << whole.substr(0, whole.size() / 2);
  }
  const std::string foreign = temp_path("foreign.ptrace");
  {
    std::ofstream out(foreign, std::ios::binary);
    out << "{\"traceEvents\": []}\n";
  }
  const std::string out_path = temp_path("bad.out");
  for (const std::string& bad : {truncated, foreign, temp_path("missing.ptrace")}) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"export", bad, "-o", out_path}, std::vector<std::string>{"summary", bad},
          std::vector<std::string>{"render", bad, "-o", out_path}}) {
      std::ostringstream out;
      std::ostringstream err;
      CHECK(tt::run_cli(args, out, err) == 1);
      CHECK(err.str().rfind("pensieve-trace: trace: ", 0) == 0);
      CHECK(err.str().find(bad) != std::string::npos);
    }
  }
  for (const auto& p : {good, truncated, foreign, out_path}) std::filesystem::remove(p);
}

TEST_CASE("bad usage is exit code 2 with a reason, and an empty window is exit code 1") {
  const std::string trace = temp_path("usage.ptrace");
  fixture::write_trace(trace);
  const std::vector<std::vector<std::string>> usage_errors = {
      {},
      {"frobnicate", trace},
      {"export", trace},
      {"export", "-o", "x.json"},
      {"summary", trace, "--top", "many"},
      {"summary", trace, "--colour"},
      {"render", trace, "-o", temp_path("x.svg"), "--from-ms", "soon"},
      {"render", trace, "-o"}};
  for (const auto& args : usage_errors) {
    std::ostringstream out;
    std::ostringstream err;
    CHECK(tt::run_cli(args, out, err) == 2);
    CHECK(!err.str().empty());
  }
  std::ostringstream out;
  std::ostringstream err;
  CHECK(tt::run_cli({"render", trace, "-o", temp_path("x.svg"), "--from-ms", "5", "--to-ms", "1"}, out, err) == 1);
  CHECK(err.str().find("window is empty") != std::string::npos);
  std::ostringstream help;
  CHECK(tt::run_cli({"--help"}, help, err) == 0);
  CHECK(help.str().find("pensieve-trace render") != std::string::npos);
  std::filesystem::remove(trace);
  std::filesystem::remove(temp_path("x.svg"));
}
