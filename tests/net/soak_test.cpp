// 200 simultaneous streaming clients on loopback for PENSIEVE_SOAK_S seconds
// (default 60): no request fails, and afterwards no connection, turn or KV
// block is left. Prints the front end's added latency (a token leaving the
// scheduler to its bytes on the socket) at that load.
#include "actors/engine.hpp"
#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "net/engine_backend.hpp"
#include "net/http_server.hpp"
#include "net/openai_routes.hpp"
#include "tests/tiny_model.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

using namespace pensieve;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;

namespace {

model::ModelWeights soak_model() {
  model::TestModelOptions o = testing::tiny_model_options();
  o.n_layers = 1;
  o.dim = 32;
  o.n_heads = 2;
  o.n_kv_heads = 1;
  o.ff_dim = 64;
  o.seed = 3;
  return testing::tiny_model(o);
}

struct ClientStats {
  std::uint64_t ok = 0, failed = 0;
  std::string first_error;
};

// One client: streaming requests until the deadline, on a keep-alive
// connection while the server keeps it open (it closes after a stream).
asio::awaitable<void> client(std::uint16_t port, int index, Clock::time_point deadline, ClientStats& stats) {
  auto ex = co_await asio::this_coro::executor;
  const asio::ip::tcp::endpoint server(asio::ip::make_address("127.0.0.1"), port);
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  auto failure = [&](std::string what) {
    ++stats.failed;
    if (stats.first_error.empty()) stats.first_error = std::move(what);
  };
  for (int i = 0; Clock::now() < deadline; ++i) {
    if (!stream) {
      stream.emplace(ex);
      buffer.clear();
      auto [cec] = co_await stream->async_connect(server, asio::as_tuple(asio::use_awaitable));
      if (cec) co_return failure("connect: " + cec.message());
    }
    http::request<http::string_body> req{http::verb::post, "/v1/chat/completions", 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = R"({"model":"tiny","stream":true,"max_tokens":8,"ignore_eos":true,"temperature":0,)"
                 R"("messages":[{"role":"user","content":"client )" +
                 std::to_string(index) + " request " + std::to_string(i) + R"("}]})";
    req.keep_alive(true);
    req.prepare_payload();
    auto [wec, written] = co_await http::async_write(*stream, req, asio::as_tuple(asio::use_awaitable));
    (void)written;
    if (wec) co_return failure("write: " + wec.message());
    http::response<http::string_body> res;
    auto [rec, read] = co_await http::async_read(*stream, buffer, res, asio::as_tuple(asio::use_awaitable));
    (void)read;
    if (rec) co_return failure("read: " + rec.message());
    if (res.result_int() != 200 || !res.body().ends_with("data: [DONE]\n\n") ||
        res.body().find("\"error\"") != std::string::npos) {
      co_return failure(std::to_string(res.result_int()) + " " + res.body());
    }
    ++stats.ok;
    if (!res.keep_alive()) {
      beast::error_code ignored;
      stream->socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
      stream.reset();
    }
  }
  if (stream) {
    beast::error_code ignored;
    stream->socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  }
}

}  // namespace

TEST_CASE("200 streaming clients for a minute: no errors, and nothing left behind", "[net][soak]") {
  const char* env = std::getenv("PENSIEVE_SOAK_S");
  const int seconds = env ? std::atoi(env) : 60;
  asio::io_context server_io;
  auto work = asio::make_work_guard(server_io);
  net::ServerMetrics metrics;
  metrics.keep_frontend_samples(true);
  actors::EngineOptions eo;
  eo.n_threads = 1;
  eo.kv_cache_mb = 64;
  eo.max_running = 256;
  eo.max_batch_tokens = 2048;
  auto engine = actors::Engine::create(soak_model(), eo);
  REQUIRE(engine.has_value());
  net::EngineBackend backend(**engine, {std::chrono::minutes(5), &metrics});
  net::RouteOptions ro;
  ro.metrics = &metrics;
  net::HttpServer server(server_io.get_executor(), net::make_openai_routes(backend, ro), {});
  REQUIRE(server.listen("127.0.0.1", 0).has_value());
  std::thread server_thread([&] { server_io.run(); });

  asio::io_context client_io;
  std::vector<ClientStats> stats(200);
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  for (int i = 0; i < 200; ++i) {
    asio::co_spawn(client_io, client(server.port(), i, deadline, stats[std::size_t(i)]), asio::detached);
  }
  client_io.run();

  std::uint64_t ok = 0, failed = 0;
  std::string first_error;
  for (const auto& s : stats) {
    ok += s.ok;
    failed += s.failed;
    if (first_error.empty()) first_error = s.first_error;
  }
  INFO("first error: " << first_error);
  CHECK(failed == 0);
  CHECK(ok >= 200);
  // The server sees every client's close; give its loop a moment to notice.
  // Asked on the server's thread: its connection set is that thread's.
  auto open_connections = [&] {
    return asio::post(server_io, asio::use_future([&server] { return server.open_connections(); })).get();
  };
  for (int i = 0; i < 200 && open_connections() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(open_connections() == 0);
  auto engine_stats = asio::co_spawn(server_io, (*engine)->stats(), asio::use_future).get();
  CHECK(engine_stats.running == 0);
  CHECK(engine_stats.waiting == 0);
  CHECK(engine_stats.free_blocks == engine_stats.num_blocks);
  // Exact quantiles of every sample (bench/fe-latency measures the same on
  // several I/O threads; this server has one).
  auto samples = metrics.frontend_samples();
  REQUIRE_FALSE(samples.empty());
  std::sort(samples.begin(), samples.end());
  const auto at = [&](double q) { return samples[std::size_t(q * double(samples.size() - 1))]; };
  std::printf("soak: %d s, 200 clients, %llu streamed requests, %zu tokens, front-end latency p50 %.3f ms, "
              "p99 %.3f ms, p999 %.3f ms\n",
              seconds, static_cast<unsigned long long>(ok), samples.size(), at(0.5) * 1e3, at(0.99) * 1e3,
              at(0.999) * 1e3);
  // The histogram /metrics reports agrees with the samples: p99's bucket holds it.
  CHECK(metrics.frontend_latency_bound(0.99) >= at(0.99));

  asio::co_spawn(server_io, server.stop(), asio::use_future).get();
  work.reset();
  server_io.stop();
  server_thread.join();
}
