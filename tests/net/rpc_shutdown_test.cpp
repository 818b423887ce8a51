// RpcServer::shutdown(grace): new turns are refused at once, a turn in
// flight delivers its whole reply and done() to its sink within the grace
// period, then the loop stops; with no grace the turn is cancelled.
#include "tests/net/rpc_fixture.hpp"

#include <chrono>
#include <future>

using namespace pensieve;
using namespace pensieve::testing;
namespace schema = pensieve::rpc::schema;
using Catch::Matchers::Contains;

namespace {

struct CountingSink final : public schema::TokenSink::Server {
  explicit CountingSink(std::shared_ptr<int> done_calls) : done_calls_(std::move(done_calls)) {}
  kj::Promise<void> deltas(DeltasContext) override { return kj::READY_NOW; }
  kj::Promise<void> done(DoneContext) override {
    ++*done_calls_;
    return kj::READY_NOW;
  }

 private:
  std::shared_ptr<int> done_calls_;
};

struct ShutdownClient {
  explicit ShutdownClient(std::uint16_t port) : ez("127.0.0.1", port), service(ez.getMain<schema::Pensieve>()) {}

  std::string create() {
    auto r = service.createConversationRequest();
    return r.send().wait(ez.getWaitScope()).getId().cStr();
  }
  capnp::Response<schema::Pensieve::SendTurnResults> send_turn(const std::string& conversation, int max_tokens) {
    auto r = service.sendTurnRequest();
    r.setConversation(conversation);
    r.setContent("Once upon a time");
    auto p = r.initParams();
    p.setTemperature(0.0f);
    p.setMaxTokens(max_tokens);
    p.setIgnoreEos(true);
    r.setSink(kj::heap<CountingSink>(done_calls));
    return r.send().wait(ez.getWaitScope());
  }

  capnp::EzRpcClient ez;
  schema::Pensieve::Client service;
  std::shared_ptr<int> done_calls = std::make_shared<int>(0);
};

}  // namespace

TEST_CASE("a shutting-down RPC server refuses new turns and lets the one in flight deliver its reply",
          "[net][rpc][shutdown]") {
  IterationGate gate;
  RpcFixture f({}, &gate);
  ShutdownClient c(f.server->port());
  const std::string id = c.create();
  gate.arm();
  auto turn = c.send_turn(id, 8);
  REQUIRE(gate.wait_held());  // mid-generation

  std::promise<void> stopped;
  auto stopped_future = stopped.get_future();
  f.server->shutdown(std::chrono::seconds(60), [&stopped] { stopped.set_value(); });
  const std::string refusal = rpc_error([&] { c.send_turn(c.create(), 4); });
  CHECK_THAT(refusal, Contains("shutting down"));
  // The turn cannot have ended: the scheduler is held.
  CHECK(stopped_future.wait_for(std::chrono::seconds(0)) == std::future_status::timeout);

  // Asked for before the turn can end: the server stops soon after its end.
  auto asked = turn.getTurn().resultRequest().send();
  c.ez.getWaitScope().poll();  // the request goes out
  gate.release();
  auto result = asked.wait(c.ez.getWaitScope());
  CHECK(result.getSummary().getCompletionTokens() == 8);
  CHECK_FALSE(result.getSummary().getCancelled());
  CHECK(*c.done_calls == 1);
  CHECK(stopped_future.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
}

TEST_CASE("an RPC server shut down without grace cancels the turn in flight and stops at once",
          "[net][rpc][shutdown]") {
  IterationGate gate;
  RpcFixture f({}, &gate);
  ShutdownClient c(f.server->port());
  const std::string id = c.create();
  gate.arm();
  auto turn = c.send_turn(id, 8);
  REQUIRE(gate.wait_held());

  std::promise<void> stopped;
  auto stopped_future = stopped.get_future();
  f.server->shutdown(std::chrono::milliseconds(0), [&stopped] { stopped.set_value(); });
  // Stopped while the scheduler is still held: the turn did not finish.
  CHECK(stopped_future.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  gate.release();
  const std::string error = rpc_error([&] { turn.getTurn().resultRequest().send().wait(c.ez.getWaitScope()); });
  CHECK_FALSE(error.empty());
  CHECK(*c.done_calls == 0);
  f.server->wait_turns_ended();  // the engine's turn was cancelled, not left running
  CHECK(f.server->active_turns() == 0);
}
