// POST /admin/trace against a real engine: the recording covers a chat
// completion made meanwhile, and answers Chrome trace-event JSON with the
// scheduler's track, its iterations and the request's phases.
#include "actors/engine.hpp"
#include "net/admin_routes.hpp"
#include "net/engine_backend.hpp"
#include "net/http_server.hpp"
#include "net/openai_routes.hpp"
#include "runtime/trace.hpp"
#include "tests/net/http_client.hpp"
#include "tests/tiny_model.hpp"
#include "tools/pensieve/trace_capture.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <future>
#include <set>
#include <thread>

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using namespace pensieve;
using pensieve::testing::http_call;

namespace {

struct Server {
  rt::Tracer tracer;  // outlives the engine, whose threads record into it
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::unique_ptr<actors::Engine> engine;
  std::unique_ptr<net::EngineBackend> backend;
  std::unique_ptr<server::TraceCapturer> capturer;
  std::unique_ptr<net::HttpServer> http;
  std::thread thread;

  explicit Server(bool recording_to_file = false) {
    actors::EngineOptions o;
    o.n_threads = 1;
    o.kv_cache_mb = 16;
    o.tracer = &tracer;
    auto e = actors::Engine::create(testing::tiny_model(), o);
    REQUIRE(e.has_value());
    engine = std::move(*e);
    backend = std::make_unique<net::EngineBackend>(*engine);
    capturer = std::make_unique<server::TraceCapturer>(tracer, recording_to_file);
    net::AdminRouteOptions admin;
    admin.admin_key = "root";
    admin.capture_trace = [c = capturer.get()](std::chrono::seconds d) { return c->capture(d); };
    admin.clear_prefix_cache = [e = engine.get()] { e->clear_prefix_cache(); };
    http = std::make_unique<net::HttpServer>(
        io.get_executor(), net::with_admin_routes(net::make_openai_routes(*backend, {}), std::move(admin)),
        net::HttpServerOptions{});
    REQUIRE(http->listen("127.0.0.1", 0).has_value());
    thread = std::thread([this] { io.run(); });
  }
  ~Server() {
    asio::co_spawn(io, http->stop(), asio::use_future).get();
    io.stop();
    thread.join();
  }
};

}  // namespace

TEST_CASE("an admin trace taken during a completion answers its spans as Chrome trace JSON", "[tools][admin]") {
  Server s;
  CHECK_FALSE(s.tracer.enabled());
  auto trace = std::async(std::launch::async, [&] {
    return http_call(s.http->port(), http::verb::post, "/admin/trace?seconds=2", {}, "Bearer root");
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!s.tracer.enabled()) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto chat = http_call(s.http->port(), http::verb::post, "/v1/chat/completions",
                        R"({"model":"tiny","messages":[{"role":"user","content":"Hello"}],"max_tokens":20,)"
                        R"("ignore_eos":true,"temperature":0})");
  REQUIRE(chat.status == 200);
  auto reply = trace.get();
  REQUIRE(reply.status == 200);
  CHECK(reply.content_type == "application/json");
  CHECK_FALSE(s.tracer.enabled());  // off again after the recording

  const auto events = json::parse(reply.body).at("traceEvents").as_array();
  std::set<std::string> tracks;
  std::set<std::string> phases;
  int iterations = 0;
  for (const auto& e : events) {
    const auto& o = e.as_object();
    const std::string ph(o.at("ph").as_string());
    const std::string name(o.at("name").as_string());
    if (ph == "M" && name == "thread_name") tracks.insert(std::string(o.at("args").at("name").as_string()));
    if (ph == "X" && name == "iteration") ++iterations;
    if (ph == "b") phases.insert(name);
  }
  INFO(reply.body.substr(0, 2000));
  CHECK(tracks.contains("scheduler"));
  CHECK(iterations >= 20);  // one per token at least
  CHECK(phases.contains("prefill"));
  CHECK(phases.contains("decode"));
}

TEST_CASE("a second admin trace while one records, or one while recording to a file, is a 409", "[tools][admin]") {
  Server file_server(true);
  auto r = http_call(file_server.http->port(), http::verb::post, "/admin/trace?seconds=1", {}, "Bearer root");
  CHECK(r.status == 409);
  CHECK(json::parse(r.body).at("error").at("code").as_string() == "trace_busy");

  Server s;
  auto first = std::async(std::launch::async, [&] {
    return http_call(s.http->port(), http::verb::post, "/admin/trace?seconds=1", {}, "Bearer root");
  });
  while (!s.tracer.enabled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto second = http_call(s.http->port(), http::verb::post, "/admin/trace?seconds=1", {}, "Bearer root");
  CHECK(second.status == 409);
  CHECK(first.get().status == 200);
}

TEST_CASE("POST /admin/prefix-cache/clear drops what stateless requests left cached", "[tools][admin]") {
  Server s;
  const std::string body = R"({"model":"tiny","messages":[{"role":"system","content":"You are a careful assistant )"
                           R"(who answers in one short sentence."},{"role":"user","content":"Hello there"}],)"
                           R"("max_tokens":4,"temperature":0})";
  auto cached_of = [&] {
    auto r = http_call(s.http->port(), http::verb::post, "/v1/chat/completions", body);
    REQUIRE(r.status == 200);
    return json::parse(r.body).at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64();
  };
  CHECK(cached_of() == 0);
  CHECK(cached_of() > 0);  // the same prompt again: its cached path
  auto get = http_call(s.http->port(), http::verb::get, "/admin/prefix-cache/clear", {}, "Bearer root");
  CHECK(get.status == 405);
  auto no_key = http_call(s.http->port(), http::verb::post, "/admin/prefix-cache/clear");
  CHECK(no_key.status == 401);
  auto cleared = http_call(s.http->port(), http::verb::post, "/admin/prefix-cache/clear", {}, "Bearer root");
  CHECK(cleared.status == 200);
  CHECK(cleared.body == R"({"cleared":true})");
  CHECK(cached_of() == 0);  // nothing left to reuse
}
