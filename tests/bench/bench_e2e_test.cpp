// pensieve-bench end to end: sweeps against in-process servers (a fake
// backend that streams exactly max_tokens words, and the real engine with a
// tiny generated model), then checks the JSON reports and the SVG plots.
#include "actors/engine.hpp"
#include "bench/pensieve-bench/options.hpp"
#include "bench/pensieve-bench/sweep.hpp"
#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "net/engine_backend.hpp"
#include "net/http_server.hpp"
#include "net/openai_routes.hpp"
#include "tests/temp_dir.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace pensieve;

namespace {

using pensieve::testing::TempDir;

std::string fake_reply(std::int32_t tokens) {
  std::string text;
  for (std::int32_t i = 0; i < tokens; ++i) text += "w" + std::to_string(i) + " ";
  return text;
}

// Streams exactly max_tokens words, one per `token_delay`, and keeps every
// request it was given.
class FakeBackend final : public net::ChatBackend {
 public:
  explicit FakeBackend(std::chrono::microseconds token_delay) : token_delay_(token_delay) {}
  std::string model_name() const override { return "fake"; }

  asio::awaitable<net::ApiResult<net::GenerationResult>> generate(const net::ChatRequest& request,
                                                                  net::DeltaSink sink) override {
    net::GenerationResult result;
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(request);
      for (const auto& m : request.messages) result.prompt_tokens += std::int32_t(m.content.size() / 4 + 1);
      if (request.conversation_id) {
        result.cached_tokens = seen_tokens_[*request.conversation_id];
        result.prompt_tokens += result.cached_tokens;
      }
    }
    auto executor = co_await asio::this_coro::executor;
    asio::steady_timer timer(executor);
    for (std::int32_t i = 0; i < request.max_tokens; ++i) {
      timer.expires_after(token_delay_);
      co_await timer.async_wait(asio::use_awaitable);
      const net::GenerationDelta delta{"w" + std::to_string(i) + " ", {}};
      const bool open = co_await sink(delta);
      if (!open) break;
      ++result.completion_tokens;
    }
    result.finish_reason = "length";
    if (request.conversation_id) {
      std::lock_guard lock(mutex_);
      seen_tokens_[*request.conversation_id] = result.prompt_tokens + result.completion_tokens;
    }
    co_return result;
  }

  std::vector<net::ChatRequest> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  std::chrono::microseconds token_delay_;
  mutable std::mutex mutex_;
  std::vector<net::ChatRequest> requests_;
  std::map<std::string, std::int32_t> seen_tokens_;
};

// An HTTP server over a backend, on its own thread.
struct ServerThread {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  net::HttpServer http;
  std::thread thread;

  explicit ServerThread(net::ChatBackend& backend)
      : http(io.get_executor(), net::make_openai_routes(backend, {}), net::HttpServerOptions{}) {
    REQUIRE(http.listen("127.0.0.1", 0).has_value());
    thread = std::thread([this] { io.run(); });
  }
  ~ServerThread() {
    asio::co_spawn(io, http.stop(), asio::use_future).get();
    io.stop();
    thread.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(http.port()); }
};

// Conversation c: user turns "c<c> t<t>", replies of 4*(t+1)+c chars, so
// max_tokens = ceil(chars / 4) = t + 1 + ceil(c / 4).
std::string write_dataset(const fs::path& file, int conversations, int turns) {
  std::ofstream out(file);
  for (int c = 0; c < conversations; ++c) {
    json::array ts;
    for (int t = 0; t < turns; ++t) {
      ts.push_back(json::object{{"role", "user"}, {"content", "c" + std::to_string(c) + " t" + std::to_string(t)}});
      ts.push_back(json::object{{"role", "assistant"}, {"content", std::string(std::size_t(4 * (t + 1) + c), 'r')}});
    }
    out << json::serialize(json::object{{"id", "conv" + std::to_string(c)}, {"turns", std::move(ts)}}) << "\n";
  }
  return file.string();
}

std::int32_t planned_tokens(int c, int t) { return t + 1 + (c + 3) / 4; }

json::object read_json(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE(in.good());
  std::stringstream s;
  s << in.rdbuf();
  return json::parse(s.str()).as_object();
}

// Every <polyline> of an SVG document, anywhere in it, by its data-series.
void collect_polylines(const boost::property_tree::ptree& node, std::map<std::string, std::string>& out) {
  for (const auto& [name, child] : node) {
    if (name == "polyline") out[child.get<std::string>("<xmlattr>.data-series")] = child.get<std::string>("<xmlattr>.points");
    collect_polylines(child, out);
  }
}

std::map<std::string, std::string> svg_polylines(const fs::path& p) {
  boost::property_tree::ptree tree;
  boost::property_tree::read_xml(p.string(), tree);  // throws on malformed XML
  REQUIRE(tree.count("svg") == 1);
  std::map<std::string, std::string> out;
  collect_polylines(tree.get_child("svg"), out);
  return out;
}

std::size_t point_count(const std::string& points) {
  std::istringstream in(points);
  std::size_t n = 0;
  for (std::string p; in >> p;) ++n;
  return n;
}

void check_distribution(const json::object& d, const std::string& suffix) {
  const double p50 = d.at("p50" + suffix).to_number<double>();
  const double p90 = d.at("p90" + suffix).to_number<double>();
  const double p99 = d.at("p99" + suffix).to_number<double>();
  CHECK(p50 > 0.0);
  CHECK(p50 <= p90);
  CHECK(p90 <= p99);
}

}  // namespace

TEST_CASE("a rate sweep over two servers writes a report per run and both plots", "[bench][e2e]") {
  FakeBackend fast(std::chrono::microseconds(500)), slow(std::chrono::microseconds(3000));
  ServerThread a(fast), b(slow);
  TempDir dir("sweep");
  const int conversations = 6, turns = 3;
  const std::string data = write_dataset(dir.path() / "chats.jsonl", conversations, turns);
  auto options = bench::parse_bench_options({"--target", "fast=" + a.url(), "--target", "slow=" + b.url() + "/v1",
                                             "--data", data, "--rate", "8,32", "--think-time-s", "0.02",
                                             "--seed", "3", "--out", (dir.path() / "out").string()});
  REQUIRE(options.has_value());
  auto out = bench::run_bench(*options, nullptr, nullptr);
  REQUIRE(out.has_value());
  CHECK(out->run_files.size() == 4);

  std::int64_t planned_total = 0;
  for (int c = 0; c < conversations; ++c) {
    for (int t = 0; t < turns; ++t) planned_total += planned_tokens(c, t);
  }
  for (const std::string label : {"fast", "slow"}) {
    for (const std::string rate : {"8", "32"}) {
      INFO(label << " at rate " << rate);
      const json::object r = read_json(dir.path() / "out" / (label + "-rate" + rate + ".json"));
      CHECK(r.at("tool").as_string() == "pensieve-bench");
      CHECK(r.at("command_line").as_string() == options->command_line);
      CHECK(r.at("timestamp").as_string().size() == 20);
      CHECK(r.at("target").at("label").as_string() == label);
      CHECK(r.at("target").at("model").as_string() == "fake");
      CHECK(r.at("load").at("rate_conversations_per_s").to_number<double>() == std::stod(rate));
      CHECK(r.at("requests").at("completed").as_int64() == conversations * turns);
      CHECK(r.at("errors").at("count").as_int64() == 0);
      // The fake streams exactly max_tokens: the output is the planned work.
      CHECK(r.at("tokens").at("completion").as_int64() == planned_total);
      CHECK(r.at("tokens").at("cached").as_int64() == 0);  // stateless: no conversation ids
      CHECK(r.at("throughput").at("requests_per_s").to_number<double>() > 0.0);
      CHECK(r.at("throughput").at("output_tokens_per_s").to_number<double>() > 0.0);
      CHECK(r.at("throughput").at("goodput_requests_per_s").to_number<double>() > 0.0);
      check_distribution(r.at("ttft").as_object(), "_ms");
      check_distribution(r.at("e2e_latency").as_object(), "_ms");
      check_distribution(r.at("normalized_latency").as_object(), "_s_per_token");
      // One gap per text event after the first; the fake sends one event per token.
      CHECK(r.at("itl").at("count").as_int64() == planned_total - conversations * turns);
      CHECK(r.at("itl").at("p50_ms").to_number<double>() >= 0.0);
      CHECK(r.at("per_request").as_array().size() == std::size_t(conversations * turns));
    }
  }
  // Stateless: each request carries the whole history, replies as the server gave them.
  const auto requests = fast.requests();
  REQUIRE(requests.size() == 2 * conversations * turns);
  for (const auto& q : requests) {
    CHECK_FALSE(q.conversation_id.has_value());
    REQUIRE(q.messages.size() % 2 == 1);
    const int c = q.messages[0].content[1] - '0';
    for (std::size_t i = 1; i < q.messages.size(); i += 2) {
      CHECK(q.messages[i].role == "assistant");
      CHECK(q.messages[i].content == fake_reply(planned_tokens(c, int(i / 2))));
    }
    CHECK(q.max_tokens == planned_tokens(c, int(q.messages.size() / 2)));
    CHECK(q.ignore_eos);
    CHECK(q.include_usage);
  }

  auto latency = svg_polylines(out->latency_plot);
  REQUIRE(latency.size() == 2);
  CHECK(point_count(latency.at("fast")) == 2);
  CHECK(point_count(latency.at("slow")) == 2);
  auto cdf = svg_polylines(out->ttft_plot);
  REQUIRE(cdf.size() == 2);
  CHECK(point_count(cdf.at("fast")) == std::size_t(2 * conversations * turns));  // two per step
  CHECK(point_count(cdf.at("slow")) == std::size_t(2 * conversations * turns));
}

TEST_CASE("a stateful client sends only the new message under one id per conversation", "[bench][e2e]") {
  FakeBackend backend(std::chrono::microseconds(200));
  ServerThread server(backend);
  TempDir dir("stateful");
  const std::string data = write_dataset(dir.path() / "chats.jsonl", 3, 3);
  auto options = bench::parse_bench_options({"--target", server.url(), "--data", data, "--concurrency", "2",
                                             "--stateful", "--out", (dir.path() / "out").string()});
  REQUIRE(options.has_value());
  auto out = bench::run_bench(*options, nullptr, nullptr);
  REQUIRE(out.has_value());
  const auto requests = backend.requests();
  REQUIRE(requests.size() == 9);
  std::map<int, std::set<std::string>> ids;
  std::map<int, int> turns;
  for (const auto& q : requests) {
    REQUIRE(q.messages.size() == 1);
    REQUIRE(q.conversation_id.has_value());
    const int c = q.messages[0].content[1] - '0';
    CHECK(q.messages[0].content == "c" + std::to_string(c) + " t" + std::to_string(turns[c]++));
    ids[c].insert(*q.conversation_id);
  }
  REQUIRE(ids.size() == 3);
  std::set<std::string> all;
  for (const auto& [c, s] : ids) {
    CHECK(s.size() == 1);
    all.insert(*s.begin());
  }
  CHECK(all.size() == 3);
  const json::object r = read_json(dir.path() / "out" / ("127.0.0.1-" + std::to_string(server.http.port()) + "-concurrency2.json"));
  CHECK(r.at("workload").at("client_mode").as_string() == "stateful");
  CHECK(r.at("tokens").at("cached").as_int64() > 0);  // the fake reports the history as cached
  CHECK(r.at("requests").at("completed").as_int64() == 9);
}
