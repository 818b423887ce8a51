// RpcServer::shutdown(grace): new turns are refused at once, a turn in
// flight delivers its whole reply and done() to its sink within the grace
// period, then the loop stops once every answer is delivered and the
// clients have closed their ends; with no grace the turn is cancelled.
#include "tests/net/rpc_fixture.hpp"

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <future>
#include <vector>

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

// Counts the tokens of every batch it receives.
struct TokenCountingSink final : public schema::TokenSink::Server {
  TokenCountingSink(std::shared_ptr<int> tokens, std::shared_ptr<int> done_calls)
      : tokens_(std::move(tokens)), done_calls_(std::move(done_calls)) {}
  kj::Promise<void> deltas(DeltasContext context) override {
    for (auto delta : context.getParams().getBatch()) *tokens_ += int(delta.getTokens().size());
    return kj::READY_NOW;
  }
  kj::Promise<void> done(DoneContext) override {
    ++*done_calls_;
    return kj::READY_NOW;
  }

 private:
  std::shared_ptr<int> tokens_;
  std::shared_ptr<int> done_calls_;
};

// A client whose socket takes little at a time (a small receive buffer), so
// that a burst of answers stays queued in the server while it reads them.
struct SlowReaderClient {
  explicit SlowReaderClient(std::uint16_t port)
      : io(kj::setupAsyncIo()),
        stream(io.lowLevelProvider->wrapSocketFd(connect_small_buffer(port),
                                                  kj::LowLevelAsyncIoProvider::TAKE_OWNERSHIP)),
        rpc(*stream),
        service(rpc.bootstrap().castAs<schema::Pensieve>()) {}

  static int connect_small_buffer(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    const int rcvbuf_bytes = 4096;  // before connect(): it sizes the window offered
    REQUIRE(::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf_bytes, sizeof rcvbuf_bytes) == 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    return fd;
  }

  kj::AsyncIoContext io;
  kj::Own<kj::AsyncIoStream> stream;
  capnp::TwoPartyClient rpc;
  schema::Pensieve::Client service;
};

// RpcServer::shutdown's `stopped` callback as a promise of a client's loop:
// the client keeps reading while it waits, and so closes its end when the
// server hangs up, as a client that reads does.
class StopSignal {
 public:
  std::function<void()> callback() {
    return [fulfiller = fulfiller_] { (*fulfiller)->fulfill(); };
  }
  bool stopped(kj::WaitScope& ws) { return stopped_.addBranch().poll(ws); }
  // True once the server stopped; false after `limit` (a failure guard).
  bool wait(kj::WaitScope& ws, kj::Timer& timer, kj::Duration limit) {
    auto guard = timer.afterDelay(limit).then([] { return false; });
    return stopped_.addBranch().then([] { return true; }).exclusiveJoin(kj::mv(guard)).wait(ws);
  }

 private:
  using Fulfiller = kj::Own<kj::CrossThreadPromiseFulfiller<void>>;
  kj::PromiseCrossThreadFulfillerPair<void> paf_ = kj::newPromiseAndCrossThreadFulfiller<void>();
  // Shared: the server may call back after a failed test has let this go.
  std::shared_ptr<Fulfiller> fulfiller_ = std::make_shared<Fulfiller>(kj::mv(paf_.fulfiller));
  kj::ForkedPromise<void> stopped_ = paf_.promise.fork();
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

  StopSignal stop;
  f.server->shutdown(std::chrono::seconds(60), stop.callback());
  const std::string refusal = rpc_error([&] { c.send_turn(c.create(), 4); });
  CHECK_THAT(refusal, Contains("shutting down"));
  // The turn cannot have ended: the scheduler is held.
  CHECK_FALSE(stop.stopped(c.ez.getWaitScope()));

  // Asked for before the turn can end: the server stops soon after its end.
  auto asked = turn.getTurn().resultRequest().send();
  c.ez.getWaitScope().poll();  // the request goes out
  gate.release();
  auto result = asked.wait(c.ez.getWaitScope());
  CHECK(result.getSummary().getCompletionTokens() == 8);
  CHECK_FALSE(result.getSummary().getCancelled());
  CHECK(*c.done_calls == 1);
  CHECK(stop.wait(c.ez.getWaitScope(), c.ez.getIoProvider().getTimer(), 60 * kj::SECONDS));
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

TEST_CASE("a shutting-down RPC server stops only once a slow reader has every answer it was owed",
          "[net][rpc][shutdown]") {
  IterationGate gate;
  RpcFixture f({}, &gate);
  SlowReaderClient c(f.server->port());
  auto& ws = c.io.waitScope;
  auto create = c.service.createConversationRequest();
  const std::string id = create.send().wait(ws).getId().cStr();

  auto tokens = std::make_shared<int>(0);
  auto done_calls = std::make_shared<int>(0);
  constexpr int max_tokens = 8;
  gate.arm();
  auto send = c.service.sendTurnRequest();
  send.setConversation(id);
  send.setContent("Once upon a time");
  send.initParams().setTemperature(0.0f);
  send.getParams().setMaxTokens(max_tokens);
  send.getParams().setIgnoreEos(true);
  send.getParams().setLogprobs(true);  // deltas carry their tokens only then
  send.setSink(kj::heap<TokenCountingSink>(tokens, done_calls));
  auto turn = send.send().wait(ws).getTurn();
  REQUIRE(gate.wait_held());  // mid-generation: nothing can be answered yet

  // Every result() is answered at the turn's end, all at once: far more than
  // the sockets hold (~120 bytes each), so most are still queued in the
  // server when the drain completes.
  constexpr int asked = 4000;
  std::vector<kj::Promise<capnp::Response<schema::Turn::ResultResults>>> results;
  for (int i = 0; i < asked; ++i) results.push_back(turn.resultRequest().send());
  // Answered without the engine, after the calls before it on the
  // connection were dispatched: each result() is waiting on the turn.
  c.service.loginRequest().send().wait(ws);

  StopSignal stop;
  f.server->shutdown(std::chrono::seconds(60), stop.callback());
  gate.release();

  int whole = 0;
  std::string first_error;
  for (auto& r : results) {
    try {
      auto answer = r.wait(ws);  // owns what getSummary() reads
      auto summary = answer.getSummary();
      if (summary.getCompletionTokens() == max_tokens && !summary.getCancelled()) ++whole;
    } catch (const kj::Exception& e) {
      if (first_error.empty()) first_error = e.getDescription().cStr();
    }
  }
  CHECK(first_error == "");
  CHECK(whole == asked);
  CHECK(*tokens == max_tokens);  // every token batch
  CHECK(*done_calls == 1);
  // Then the server goes, and the connection with it.
  auto& timer = c.io.provider->getTimer();
  CHECK(stop.wait(ws, timer, 60 * kj::SECONDS));
  auto closed = c.rpc.onDisconnect().then([] { return true; });
  CHECK(closed.exclusiveJoin(timer.afterDelay(60 * kj::SECONDS).then([] { return false; })).wait(ws));
}
