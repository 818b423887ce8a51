// 200 simultaneous streaming clients on loopback for PENSIEVE_SOAK_S seconds
// (default 60): no request fails, and afterwards no connection, turn or KV
// block is left. Prints the front end's added latency (a token leaving the
// scheduler to its bytes on the socket) at that load.
#include "actors/engine.hpp"
#include "bench/common/one_layer_model.hpp"
#include "bench/common/stream_load.hpp"
#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "net/engine_backend.hpp"
#include "net/http_server.hpp"
#include "net/openai_routes.hpp"
#include "tests/tiny_model.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

using namespace pensieve;
namespace asio = boost::asio;

namespace {

model::ModelWeights soak_model() {
  return testing::tiny_model(bench::one_layer_model_options());
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
  eo.scheduler.max_running = 256;
  eo.scheduler.max_batch_tokens = 2048;
  auto engine = actors::Engine::create(soak_model(), eo);
  REQUIRE(engine.has_value());
  net::EngineBackend backend(**engine, {std::chrono::minutes(5), &metrics});
  net::RouteOptions ro;
  ro.metrics = &metrics;
  net::HttpServer server(server_io.get_executor(), net::make_openai_routes(backend, ro), {});
  REQUIRE(server.listen("127.0.0.1", 0).has_value());
  std::thread server_thread([&] { server_io.run(); });

  const auto load =
      bench::run_stream_clients(server.port(), 200, std::chrono::seconds(seconds), 8, "tiny");
  const std::uint64_t ok = load.ok, failed = load.failed;
  const std::string& first_error = load.first_error;
  INFO("first error: " << first_error);
  CHECK(failed == 0);
  CHECK(ok >= 200);
  // The server sees every client's close; give its loop a moment to notice.
  // Asked on the server's thread: its connection set is that thread's.
  auto open_connections = [&] {
    return asio::post(server_io, asio::use_future([&server] { return server.open_connections(); }))
        .get();
  };
  for (int i = 0; i < 200 && open_connections() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(open_connections() == 0);
  (*engine)->clear_prefix_cache();  // the stateless turns' KV stays cached until then
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
  std::printf(
      "soak: %d s, 200 clients, %llu streamed requests, %zu tokens, front-end latency p50 %.3f ms, "
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
