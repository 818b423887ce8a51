// pensieve-bench against the real engine: a tiny generated model behind our
// OpenAI server, replayed with fixed output lengths.
#include "actors/engine.hpp"
#include "bench/pensieve-bench/options.hpp"
#include "bench/pensieve-bench/sweep.hpp"
#include "net/engine_backend.hpp"
#include "net/http_server.hpp"
#include "net/openai_routes.hpp"
#include "tests/tiny_model.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace pensieve;

namespace {

// The tests' tiny model with a longer context.
model::ModelWeights tiny_model() {
  auto o = testing::tiny_model_options();
  o.max_context = 512;
  return testing::tiny_model(o);
}

struct EngineServer {
  // Declared first, destroyed last: the engine completes turns on it.
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::unique_ptr<actors::Engine> engine;
  std::unique_ptr<net::EngineBackend> backend;
  std::unique_ptr<net::HttpServer> http;
  std::thread thread;

  explicit EngineServer(model::ModelWeights weights) {
    auto e = actors::Engine::create(std::move(weights), {.n_threads = 1, .kv_cache_mb = 16});
    REQUIRE(e.has_value());
    engine = std::move(*e);
    backend = std::make_unique<net::EngineBackend>(*engine);
    http = std::make_unique<net::HttpServer>(io.get_executor(), net::make_openai_routes(*backend, {}),
                                             net::HttpServerOptions{});
    REQUIRE(http->listen("127.0.0.1", 0).has_value());
    thread = std::thread([this] { io.run(); });
  }
  ~EngineServer() {
    asio::co_spawn(io, http->stop(), asio::use_future).get();
    io.stop();
    thread.join();
  }
};

// Replays two short conversations (two turns each, max_tokens 4) with the
// given client flag and returns the run's report.
json::object replay(const std::string& mode_flag) {
  const fs::path dir = fs::temp_directory_path() / ("pensieve-bench-engine-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  json::object report;
  {
    EngineServer server(tiny_model());
    {
      std::ofstream data(dir / "chats.jsonl");
      data << R"({"id":"a","turns":[{"role":"user","content":"Hello there"},{"role":"assistant","content":"Hi, how are you?"},)"
              R"({"role":"user","content":"Fine, thanks."},{"role":"assistant","content":"Good."}]})" "\n"
              R"({"id":"b","turns":[{"role":"user","content":"Name a colour."},{"role":"assistant","content":"Blue, like the sea."},)"
              R"({"role":"user","content":"Another?"},{"role":"assistant","content":"Green."}]})" "\n";
    }
    auto options = bench::parse_bench_options({"--target", "engine=http://127.0.0.1:" + std::to_string(server.http->port()),
                                               "--data", (dir / "chats.jsonl").string(), "--concurrency", "2",
                                               "--max-tokens", "4", mode_flag, "--out", (dir / "out").string()});
    REQUIRE(options.has_value());
    auto out = bench::run_bench(*options, nullptr, nullptr);
    REQUIRE(out.has_value());
    std::ifstream in(dir / "out" / "engine-concurrency2.json");
    std::stringstream text;
    text << in.rdbuf();
    report = json::parse(text.str()).as_object();
  }
  fs::remove_all(dir);
  return report;
}

void check_exact_work(const json::object& r) {
  CHECK(r.at("target").at("model").as_string() == "tiny");
  CHECK(r.at("errors").at("count").as_int64() == 0);
  CHECK(r.at("requests").at("completed").as_int64() == 4);
  // min(ceil(chars / 4), 4) per turn: 4 + 2 + 4 + 2.
  CHECK(r.at("tokens").at("completion").as_int64() == 12);
  for (const auto& q : r.at("per_request").as_array()) {
    CHECK(q.at("usage_reported").as_bool());
    CHECK(q.at("completion_tokens").as_int64() == q.at("max_tokens").as_int64());
    CHECK(q.at("prompt_tokens").as_int64() > 0);
    CHECK(q.at("ttft_ms").to_number<double>() > 0.0);
  }
}

}  // namespace

TEST_CASE("the bench drives the real engine and counts exactly the tokens it asked for", "[bench][e2e]") {
  const json::object r = replay("--stateless");
  check_exact_work(r);
  CHECK(r.at("workload").at("client_mode").as_string() == "stateless");
}

TEST_CASE("against the stateful engine, a stateful client's later turns reuse cached tokens", "[bench][e2e]") {
  const json::object r = replay("--stateful");
  check_exact_work(r);
  for (const auto& q : r.at("per_request").as_array()) {
    INFO("conversation " << q.at("conversation").as_int64() << " turn " << q.at("turn").as_int64());
    if (q.at("turn").as_int64() == 0) {
      CHECK(q.at("cached_tokens").as_int64() == 0);
    } else {
      CHECK(q.at("cached_tokens").as_int64() > 0);
    }
  }
}
