// The `pensieve` binary on SIGTERM, for the WebSocket chat and the Cap'n
// Proto RPC: a turn in flight gets --shutdown-grace-s to finish (a WebSocket
// then closes with 1001 "going away"), a new turn is refused, and the process
// exits 0; with a grace of 0 the turns are cancelled and it exits at once.
#include "schemas/pensieve.capnp.h"
#include "tests/net/ws_client.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tools/pensieve_child.hpp"

#include <capnp/ez-rpc.h>
#include <catch2/catch.hpp>
#include <kj/debug.h>

#include <chrono>
#include <regex>
#include <string>

namespace schema = pensieve::rpc::schema;
using pensieve::testing::PensieveChild;
using pensieve::testing::WsClient;
using Clock = std::chrono::steady_clock;

namespace {

// Two HTTP I/O threads: the stop reaches both servers of the group.
std::vector<std::string> server_args(int grace_s) {
  return {"--port", "0", "--rpc-port", "0", "--threads", "1", "--kv-device-mb", "64", "--http-threads", "2",
          "--shutdown-grace-s", std::to_string(grace_s)};
}

// Opens a conversation and starts a long turn; returns once its first delta is in.
void start_long_turn(WsClient& ws) {
  ws.send(boost::json::object{{"type", "open"}});
  REQUIRE(ws.next().at("type") == "opened");
  ws.send(boost::json::object{{"type", "send"},
                              {"content", "Tell me a story"},
                              {"max_tokens", 1000},
                              {"ignore_eos", true},
                              {"temperature", 0}});
  REQUIRE(ws.next().at("type") == "delta");
}

// Records what the server streams; resolves `first` at the first batch.
struct Sink final : public schema::TokenSink::Server {
  explicit Sink(kj::Own<kj::PromiseFulfiller<void>> first) : first_(kj::mv(first)) {}
  kj::Promise<void> deltas(DeltasContext context) override {
    for (auto d : context.getParams().getBatch()) tokens += std::int32_t(d.getTokens().size());
    if (first_) {
      first_->fulfill();
      first_ = nullptr;
    }
    return kj::READY_NOW;
  }
  kj::Promise<void> done(DoneContext) override {
    ++*done_calls;
    return kj::READY_NOW;
  }
  std::int32_t tokens = 0;
  std::shared_ptr<int> done_calls = std::make_shared<int>(0);

 private:
  kj::Own<kj::PromiseFulfiller<void>> first_;
};

struct RpcTurnCall {
  capnp::Response<schema::Pensieve::SendTurnResults> accepted;
  std::shared_ptr<int> done_calls;
  std::string conversation;
};

// The description of the kj::Exception `f` throws; empty when it throws none.
template <class F>
std::string rpc_error(F&& f) {
  try {
    f();
  } catch (const kj::Exception& e) {
    return e.getDescription().cStr();
  }
  return "";
}

// Starts a long turn over RPC; returns once its first batch of deltas is in.
RpcTurnCall start_rpc_turn(capnp::EzRpcClient& client) {
  auto first = kj::newPromiseAndFulfiller<void>();
  auto sink = kj::heap<Sink>(kj::mv(first.fulfiller));
  auto done_calls = sink->done_calls;
  auto server = client.getMain<schema::Pensieve>();
  auto conversation = server.createConversationRequest().send().wait(client.getWaitScope());
  auto r = server.sendTurnRequest();
  r.setConversation(conversation.getId());
  r.setContent("Tell me a story");
  auto p = r.initParams();
  p.setTemperature(0.0f);
  p.setMaxTokens(1000);
  p.setIgnoreEos(true);
  r.setSink(kj::mv(sink));
  auto accepted = r.send().wait(client.getWaitScope());
  first.promise.wait(client.getWaitScope());
  return {kj::mv(accepted), kj::mv(done_calls), conversation.getId().cStr()};
}

}  // namespace

TEST_CASE("SIGTERM lets a WebSocket reply finish, refuses a new turn, then closes with 1001",
          "[tools][shutdown][ws]") {
  pensieve::testing::TempDir cache("pensieve-ws-shutdown");
  PensieveChild server(pensieve::testing::pensieve_binary(), cache.path(), server_args(30));
  const auto port = server.http_port();
  WsClient ws(port);
  start_long_turn(ws);

  const auto signalled = Clock::now();
  REQUIRE(::kill(server.pid, SIGTERM) == 0);
  // Once the listener is closed, the session has been told to go away.
  pensieve::testing::wait_refused(port, std::chrono::seconds(30));
  ws.send(boost::json::object{{"type", "send"}, {"content", "one more"}});
  int deltas = 1;
  bool refused_new_turn = false;
  boost::json::object end;
  for (;;) {
    auto got = ws.receive();
    if (!got) {
      INFO("server stderr:\n" << server.stderr_text());
      FAIL("the connection ended after " << deltas << " deltas, close code " << ws.close_code());
    }
    auto m = std::move(*got);
    if (m.at("type") == "delta") {
      ++deltas;
      continue;
    }
    if (m.at("type") == "error" && m.at("code") == "going_away") {
      refused_new_turn = true;
      continue;
    }
    end = std::move(m);
    break;
  }
  CHECK(refused_new_turn);
  REQUIRE(end.at("type") == "done");
  CHECK(end.at("finish_reason") == "length");
  CHECK(end.at("usage").at("completion_tokens") == 1000);
  CHECK(deltas > 1);
  CHECK_FALSE(ws.receive().has_value());
  CHECK(ws.close_code() == 1001);
  CHECK(server.wait_exit(std::chrono::seconds(30)) == 0);
  CHECK(Clock::now() - signalled < std::chrono::seconds(30));
}

// Clients can connect from the "serving" line on, before the RPC server is
// up: a SIGTERM from then on takes the graceful path (it once killed the
// process by the default action: a WebSocket turn just started was cut off).
TEST_CASE("SIGTERM right after the server says it serves exits 0, not by the signal", "[tools][shutdown]") {
  pensieve::testing::TempDir cache("pensieve-early-sigterm");
  PensieveChild server(pensieve::testing::pensieve_binary(), cache.path(), server_args(30));
  (void)server.http_port();
  REQUIRE(::kill(server.pid, SIGTERM) == 0);
  const int status = server.wait_exit(std::chrono::seconds(30));
  INFO("server stderr:\n" << server.stderr_text());
  CHECK(status == 0);
}

TEST_CASE("SIGTERM lets an RPC turn deliver its whole reply and done(), refuses a new one, then exits 0",
          "[tools][shutdown][rpc]") {
  pensieve::testing::TempDir cache("pensieve-rpc-shutdown");
  PensieveChild server(pensieve::testing::pensieve_binary(), cache.path(), server_args(30));
  const auto port = server.http_port();
  capnp::EzRpcClient client("127.0.0.1", server.rpc_port());
  auto call = start_rpc_turn(client);

  const auto signalled = Clock::now();
  REQUIRE(::kill(server.pid, SIGTERM) == 0);
  // The RPC server refuses turns before the HTTP listener closes.
  pensieve::testing::wait_refused(port, std::chrono::seconds(30));
  auto service = client.getMain<schema::Pensieve>();
  auto again = service.sendTurnRequest();
  again.setConversation(call.conversation);
  again.setContent("one more");
  again.initParams().setMaxTokens(4);
  const std::string refusal = rpc_error([&] { again.send().wait(client.getWaitScope()); });
  CHECK_THAT(refusal, Catch::Matchers::Contains("shutting down"));
  auto result = call.accepted.getTurn().resultRequest().send().wait(client.getWaitScope());
  CHECK(result.getSummary().getCompletionTokens() == 1000);
  CHECK(result.getSummary().getFinish() == schema::FinishReason::LENGTH);
  CHECK_FALSE(result.getSummary().getCancelled());
  CHECK(*call.done_calls == 1);
  CHECK(server.wait_exit(std::chrono::seconds(30)) == 0);
  CHECK(Clock::now() - signalled < std::chrono::seconds(30));
}

TEST_CASE("with --shutdown-grace-s 0, SIGTERM cancels WebSocket and RPC turns and exits 0 at once",
          "[tools][shutdown][ws][rpc]") {
  pensieve::testing::TempDir cache("pensieve-fe-shutdown-now");
  PensieveChild server(pensieve::testing::pensieve_binary(), cache.path(), server_args(0));
  const auto port = server.http_port();
  capnp::EzRpcClient client("127.0.0.1", server.rpc_port());
  auto call = start_rpc_turn(client);
  WsClient ws(port);
  start_long_turn(ws);

  const auto signalled = Clock::now();
  REQUIRE(::kill(server.pid, SIGTERM) == 0);
  CHECK(server.wait_exit(std::chrono::seconds(30)) == 0);
  CHECK(Clock::now() - signalled < std::chrono::seconds(5));
  // Neither reply got to its end.
  bool done = false;
  while (auto m = ws.receive()) done = done || m->at("type") == "done";
  CHECK_FALSE(done);
  const std::string error =
      rpc_error([&] { call.accepted.getTurn().resultRequest().send().wait(client.getWaitScope()); });
  CHECK_FALSE(error.empty());
  CHECK(*call.done_calls == 0);
}
