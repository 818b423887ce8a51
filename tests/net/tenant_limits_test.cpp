// Per-tenant turn limits (--max-turns-per-tenant): the limiter itself, and
// what each front end answers a turn over its tenant's limit: HTTP 429 with
// Retry-After, WebSocket close 1013, RPC OVERLOADED.
#include "net/engine_backend.hpp"
#include "net/tenant_limits.hpp"
#include "tests/actors/engine_fixture.hpp"
#include "tests/net/http_client.hpp"
#include "tests/net/rpc_fixture.hpp"
#include "tests/net/server_fixture.hpp"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <thread>

using namespace pensieve;
namespace http = boost::beast::http;
namespace json = boost::json;

TEST_CASE("a tenant gets at most its limit of turn slots, other tenants their own", "[net][limits]") {
  net::TenantTurnLimiter limiter(2);
  auto a1 = limiter.try_acquire("a");
  auto a2 = limiter.try_acquire("a");
  REQUIRE(a1);
  REQUIRE(a2);
  CHECK_FALSE(limiter.try_acquire("a"));
  CHECK(limiter.running("a") == 2);
  auto b1 = limiter.try_acquire("b");
  CHECK(b1);
  a1.reset();
  CHECK(limiter.running("a") == 1);
  CHECK(limiter.try_acquire("a"));  // taken and given back at once
  CHECK(limiter.running("a") == 1);
  // A permit may outlive its limiter (a turn ending after the server's
  // front ends are gone).
  auto outlives = std::make_unique<net::TenantTurnLimiter>(1);
  auto permit = outlives->try_acquire("c");
  outlives.reset();
  permit.reset();
  net::TenantTurnLimiter unlimited(0);
  std::vector<std::shared_ptr<const void>> many;
  for (int i = 0; i < 100; ++i) many.push_back(unlimited.try_acquire("a"));
  CHECK(std::all_of(many.begin(), many.end(), [](const auto& p) { return p != nullptr; }));
}

TEST_CASE("a turn over its tenant's limit is a 429 with Retry-After while the other runs", "[net][limits]") {
  testing::IterationGate gate;
  gate.arm();
  net::EngineBackendOptions options;
  options.limits.tenant_turns = std::make_shared<net::TenantTurnLimiter>(1);
  testing::TestServer s(
      testing::stories_model(),
      [&gate](actors::EngineOptions& o) { o.on_iteration = [&gate](const actors::IterationRecord&) { gate.pass(); }; },
      options);
  const std::string body = R"({"model":")" + s.engine->model_name() +
                           R"(","messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":4,"temperature":0})";
  int first_status = 0;  // checked on this thread: Catch2 assertions are not thread-safe
  std::thread first([&] {
    first_status = testing::http_call(s.port(), http::verb::post, "/v1/chat/completions", body).status;
  });
  const bool held = gate.wait_held();  // the first turn is in the engine
  if (!held) {
    gate.release();
    first.join();
    FAIL("the first turn never reached the engine (status " << first_status << ")");
  }
  auto refused = testing::http_call(s.port(), http::verb::post, "/v1/chat/completions", body);
  CHECK(refused.status == 429);
  CHECK(refused.retry_after == "1");
  const json::value doc = json::parse(refused.body);
  const json::object& error = doc.at("error").as_object();
  CHECK(error.at("code") == "rate_limit_exceeded");
  CHECK_THAT(std::string(error.at("message").as_string()), Catch::Contains("1 turns running"));
  gate.release();
  first.join();
  CHECK(first_status == 200);
  // The slot is back once the first turn has ended.
  CHECK(testing::http_call(s.port(), http::verb::post, "/v1/chat/completions", body).status == 200);
  CHECK(options.limits.tenant_turns->running("") == 0);
}

TEST_CASE("an rpc turn over its tenant's limit is refused as OVERLOADED", "[rpc][limits]") {
  testing::IterationGate gate;
  net::RpcServerOptions options;
  options.limits.tenant_turns = std::make_shared<net::TenantTurnLimiter>(1);
  testing::RpcFixture f(options, &gate);
  capnp::EzRpcClient client("127.0.0.1", f.server->port());
  auto server = client.getMain<rpc::schema::Pensieve>();
  auto& ws = client.getWaitScope();
  for (const char* id : {"a", "b"}) {
    auto r = server.createConversationRequest();
    r.setId(id);
    r.send().wait(ws);
  }
  // A sink that accepts everything.
  class Sink final : public rpc::schema::TokenSink::Server {
   protected:
    kj::Promise<void> deltas(DeltasContext) override { return kj::READY_NOW; }
    kj::Promise<void> done(DoneContext) override { return kj::READY_NOW; }
  };
  auto turn = [&](const char* id) {
    auto r = server.sendTurnRequest();
    r.setConversation(id);
    r.setContent("Once upon a time");
    auto p = r.initParams();
    p.setMaxTokens(4);
    p.setTemperature(0.0f);
    r.setSink(kj::heap<Sink>());
    return r.send();
  };
  gate.arm();
  auto running = turn("a").wait(ws).getTurn();  // accepted: it holds the tenant's one slot
  REQUIRE(gate.wait_held());
  try {
    turn("b").wait(ws);
    FAIL("the second turn was accepted");
  } catch (const kj::Exception& e) {
    CHECK(e.getType() == kj::Exception::Type::OVERLOADED);
    CHECK_THAT(e.getDescription().cStr(), Catch::Contains("rate limited: "));
  }
  gate.release();
  running.resultRequest().send().wait(ws);
  f.server->wait_turns_ended();
  CHECK(options.limits.tenant_turns->running("") == 0);
}
