// The Cap'n Proto interface over loopback: a real client (its own kj loop on
// the test's thread) against an RpcServer (its loop on its own thread) over a
// real Engine.
#include "tests/net/invalid_turns.hpp"
#include "tests/net/rpc_fixture.hpp"

#include <algorithm>
#include <vector>

using namespace pensieve;
using namespace pensieve::testing;
namespace schema = pensieve::rpc::schema;
using Catch::Matchers::Contains;

namespace {

struct SinkLog {
  std::vector<std::vector<std::string>> batches;  // texts per deltas() call
  std::vector<std::int32_t> tokens;
  std::string text;
  int malformed = 0;  // deltas whose logprobs do not match their tokens
  int done_calls = 0;
  std::int32_t done_completion_tokens = -1;
  // Flow control: calls answered later by the test.
  bool hold = false;
  bool fail = false;  // deltas() throws
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> held;
  std::size_t max_in_flight = 0;
  std::function<void(SinkLog&)> on_batch;  // after each batch is logged
};

class LoggingSink final : public schema::TokenSink::Server {
 public:
  explicit LoggingSink(SinkLog& log) : log_(log) {}

 protected:
  kj::Promise<void> deltas(DeltasContext context) override {
    std::vector<std::string> texts;
    for (auto d : context.getParams().getBatch()) {
      texts.emplace_back(d.getText().cStr());
      log_.text += d.getText().cStr();
      for (auto t : d.getTokens()) log_.tokens.push_back(t);
      if (d.getLogprobs().size() != d.getTokens().size()) ++log_.malformed;
    }
    log_.batches.push_back(std::move(texts));
    log_.max_in_flight = std::max(log_.max_in_flight, log_.held.size() + 1);  // this call included
    if (log_.on_batch) log_.on_batch(log_);
    if (log_.fail) KJ_FAIL_REQUIRE("this sink refuses deltas");
    if (!log_.hold) return kj::READY_NOW;
    auto paf = kj::newPromiseAndFulfiller<void>();
    log_.held.push_back(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }
  kj::Promise<void> done(DoneContext context) override {
    ++log_.done_calls;
    log_.done_completion_tokens = context.getParams().getSummary().getCompletionTokens();
    return kj::READY_NOW;
  }

 private:
  SinkLog& log_;
};

struct Client {
  explicit Client(std::uint16_t port) : ez("127.0.0.1", port), server(ez.getMain<schema::Pensieve>()) {}
  kj::WaitScope& ws() { return ez.getWaitScope(); }

  std::string create(const std::string& id) {
    auto r = server.createConversationRequest();
    r.setId(id);
    return r.send().wait(ws()).getId().cStr();
  }
  capnp::Request<schema::Pensieve::SendTurnParams, schema::Pensieve::SendTurnResults> turn_request(
      const std::string& id, const std::string& content, SinkLog& log, std::int32_t max_tokens) {
    auto r = server.sendTurnRequest();
    r.setConversation(id);
    r.setContent(content);
    auto p = r.initParams();
    p.setTemperature(0.0f);
    p.setMaxTokens(max_tokens);
    p.setIgnoreEos(true);
    p.setLogprobs(true);  // deltas carry their token ids
    r.setSink(kj::heap<LoggingSink>(log));
    return r;
  }
  // Sends a turn and waits for its summary.
  capnp::Response<schema::Turn::ResultResults> turn(const std::string& id, const std::string& content, SinkLog& log,
                                                    std::int32_t max_tokens) {
    auto turn = turn_request(id, content, log, max_tokens).send().getTurn();
    return turn.resultRequest().send().wait(ws());
  }
  std::vector<std::string> list() {
    std::vector<std::string> out;
    auto response = server.listConversationsRequest().send().wait(ws());  // owns what getIds() reads
    for (auto id : response.getIds()) out.emplace_back(id.cStr());
    std::sort(out.begin(), out.end());
    return out;
  }
  capnp::Response<schema::Pensieve::GetConversationResults> history(const std::string& id) {
    auto r = server.getConversationRequest();
    r.setId(id);
    return r.send().wait(ws());
  }

  capnp::EzRpcClient ez;
  schema::Pensieve::Client server;
};

}  // namespace

TEST_CASE("an rpc turn streams its reply in batches with usage and the next turn reuses the cache", "[rpc]") {
  RpcFixture f;
  Client c(f.server->port());
  REQUIRE(c.create("c1") == "c1");

  SinkLog first;
  auto r1 = c.turn("c1", "Once upon a time", first, 12);
  auto s1 = r1.getSummary();
  CHECK(s1.getFinish() == schema::FinishReason::LENGTH);
  CHECK(s1.getCompletionTokens() == 12);
  CHECK(s1.getPromptTokens() > 0);
  CHECK(s1.getCachedTokens() == 0);
  CHECK_FALSE(s1.getCancelled());
  CHECK(first.tokens.size() == 12);
  CHECK_FALSE(first.batches.empty());
  CHECK(first.malformed == 0);
  CHECK(first.done_calls == 1);
  CHECK(first.done_completion_tokens == 12);

  SinkLog second;
  auto r2 = c.turn("c1", "and then", second, 6);
  CHECK(r2.getSummary().getCompletionTokens() == 6);
  CHECK(r2.getSummary().getCachedTokens() > 0);

  auto h = c.history("c1");
  REQUIRE(h.getHistory().size() == 4);
  CHECK(std::string(h.getHistory()[0].getRole().cStr()) == "user");
  CHECK(std::string(h.getHistory()[0].getContent().cStr()) == "Once upon a time");
  CHECK(std::string(h.getHistory()[1].getRole().cStr()) == "assistant");
  CHECK(std::string(h.getHistory()[1].getContent().cStr()) == first.text);
  CHECK(std::string(h.getHistory()[3].getContent().cStr()) == second.text);
  CHECK(h.getTurns() == 2);
  CHECK(h.getTokens() > s1.getPromptTokens() + 12);
}

TEST_CASE("an rpc conversation past the context drops its oldest turn and says how many tokens in truncatedTokens",
          "[rpc][stateful]") {
  RpcFixture f;
  Client c(f.server->port());
  const std::string story = "Once upon a time there was a little girl who loved the sea";
  c.create("a");
  c.create("b");
  SinkLog log;
  REQUIRE(c.turn("a", story, log, 40).getSummary().getCompletionTokens() == 40);
  REQUIRE(c.turn("b", story, log, 40).getSummary().getCompletionTokens() == 40);
  // "b" shows what "a"'s next turn asks for: the same history and prompt.
  auto fits = c.turn("b", "And then?", log, 1);
  const std::int32_t asked = fits.getSummary().getPromptTokens();
  CHECK(fits.getSummary().getTruncatedTokens() == 0);
  const std::int32_t context = f.engine->max_context();
  const std::int32_t max_tokens = context - asked + 5;  // 5 tokens past the context
  auto cut = c.turn("a", "And then?", log, max_tokens);
  const auto summary = cut.getSummary();
  CHECK(summary.getTruncatedTokens() == asked - summary.getPromptTokens());
  CHECK(summary.getTruncatedTokens() > 0);
  CHECK(summary.getPromptTokens() + max_tokens <= context);
  auto h = c.history("a");
  REQUIRE(h.getHistory().size() == 2);
  CHECK(std::string(h.getHistory()[0].getContent().cStr()) == "And then?");
}

TEST_CASE("rpc conversations are listed and deleted and a deleted one is not found", "[rpc]") {
  RpcFixture f;
  Client c(f.server->port());
  c.create("a");
  c.create("b");
  const std::string fresh = c.create("");
  CHECK_FALSE(fresh.empty());
  auto expected = std::vector<std::string>{"a", "b", fresh};
  std::sort(expected.begin(), expected.end());
  CHECK(c.list() == expected);

  auto del = c.server.deleteConversationRequest();
  del.setId("a");
  del.send().wait(c.ws());
  expected.erase(std::find(expected.begin(), expected.end(), "a"));
  CHECK(c.list() == expected);
  CHECK_THAT(rpc_error([&] { c.history("a"); }), Contains("not found"));
  CHECK_THAT(rpc_error([&] {
               auto again = c.server.deleteConversationRequest();
               again.setId("a");
               again.send().wait(c.ws());
             }),
             Contains("not found: no conversation 'a'"));
}

TEST_CASE("bad rpc requests are refused with a clear exception", "[rpc]") {
  RpcFixture f;
  Client c(f.server->port());
  c.create("c");
  SinkLog log;
  CHECK_THAT(rpc_error([&] { c.turn("nope", "hi", log, 4); }), Contains("not found: no conversation 'nope'"));
  CHECK_THAT(rpc_error([&] { c.turn("c", "hi", log, 0); }),
             Contains("invalid request: 'max_tokens' must be between 1 and 4096"));
  CHECK_THAT(rpc_error([&] { c.turn("c", "", log, 4); }), Contains("invalid request: content must not be empty"));
  CHECK_THAT(rpc_error([&] {
               auto r = c.turn_request("c", "hi", log, 4);
               r.getParams().setTemperature(-1.0f);
               r.send().getTurn().resultRequest().send().wait(c.ws());
             }),
             Contains("invalid request: 'temperature' must be between 0 and 2"));
  CHECK_THAT(rpc_error([&] { c.turn("c", "hi", log, 4000); }),
             Contains("invalid request: this model's context"));
  CHECK_THAT(rpc_error([&] { c.create("c"); }), Contains("invalid request: conversation 'c' already exists"));
  CHECK_THAT(rpc_error([&] { c.create("bad id!"); }), Contains("invalid request"));
  CHECK(log.batches.empty());
  CHECK(f.stats().running == 0);
}

TEST_CASE("an rpc turn on a conversation deleted past max_conversations is not found and says it expired",
          "[rpc][expiry]") {
  RpcFixture f({}, nullptr, [](actors::EngineOptions& o) { o.max_conversations = 1; });
  Client c(f.server->port());
  SinkLog log;
  c.create("first");
  CHECK(c.turn("first", "hello", log, 4).getSummary().getCompletionTokens() == 4);
  CHECK(c.history("first").getTurns() == 1);  // answered once the turn's history is recorded: idle
  c.create("second");
  CHECK(c.turn("second", "hello", log, 4).getSummary().getCompletionTokens() == 4);
  CHECK(c.history("second").getTurns() == 1);
  const std::string expired =
      "not found: conversation 'first' expired (idle conversations are deleted beyond the 1 most recently used); "
      "create it again to reuse its id";
  CHECK_THAT(rpc_error([&] { c.turn("first", "and then?", log, 4); }), Contains(expired));
  CHECK_THAT(rpc_error([&] { c.history("first"); }), Contains("not found: "));
  // Created again, its id is usable.
  CHECK(c.create("first") == "first");
  CHECK(c.turn("first", "and then?", log, 4).getSummary().getCompletionTokens() == 4);
  CHECK(f.stats().running == 0);
}

TEST_CASE("cancelling an rpc turn mid-generation ends it cancelled and frees the engine", "[rpc]") {
  IterationGate gate;
  RpcFixture f({}, &gate);
  Client c(f.server->port());
  c.create("c");
  SinkLog log;
  auto first = kj::newPromiseAndFulfiller<void>();
  log.on_batch = [&](SinkLog&) {
    if (log.batches.size() == 1) {
      gate.arm();  // the scheduler stops at its next iteration until released
      first.fulfiller->fulfill();
    }
  };
  auto turn = c.turn_request("c", "Once upon a time", log, 400).send().getTurn();
  auto result = turn.resultRequest().send();
  first.promise.wait(c.ws());
  turn.cancelRequest().send().wait(c.ws());  // the engine's stream has been told
  gate.release();
  auto response = result.wait(c.ws());
  auto summary = response.getSummary();
  CHECK(summary.getCancelled());
  CHECK(summary.getCompletionTokens() < 400);
  CHECK(std::int32_t(log.tokens.size()) == summary.getCompletionTokens());
  f.server->wait_turns_ended();
  CHECK(f.stats().running == 0);
  CHECK(f.stats().waiting == 0);
  // The conversation keeps what was generated and takes the next turn.
  SinkLog next;
  CHECK(c.turn("c", "go on", next, 4).getSummary().getCompletionTokens() == 4);
}

TEST_CASE("an rpc turn that outlives the request timeout fails with a timeout and frees the engine",
          "[rpc][timeout]") {
  net::RpcServerOptions options;
  options.turn.timeout = std::chrono::milliseconds(1);
  RpcFixture f(options);
  Client c(f.server->port());
  c.create("c");
  SinkLog log;
  CHECK_THAT(rpc_error([&] { c.turn("c", "Once upon a time", log, 400); }),
             Contains("timeout: the request timed out after 1 ms"));
  f.server->wait_turns_ended();
  CHECK(f.stats().running == 0);
  CHECK(f.stats().waiting == 0);
  // The conversation is left consistent: it takes the next turn, which
  // times out the same way (the timeout is the server's, for every turn).
  SinkLog next;
  CHECK_THAT(rpc_error([&] { c.turn("c", "go on", next, 400); }), Contains("timeout: "));
  f.server->wait_turns_ended();
  CHECK(f.stats().running == 0);
}

TEST_CASE("rpc turns record their tokens and first-token times in the server's metrics", "[rpc][metrics]") {
  net::ServerMetrics metrics;
  net::RpcServerOptions options;
  options.turn.metrics = &metrics;
  RpcFixture f(options);
  Client c(f.server->port());
  c.create("c");
  SinkLog log;
  CHECK(c.turn("c", "Once upon a time", log, 6).getSummary().getCompletionTokens() == 6);
  CHECK(c.turn("c", "and then", log, 5).getSummary().getCompletionTokens() == 5);
  const std::string text = metrics.render({});
  CHECK_THAT(text, Contains("pensieve_generated_tokens_total 11\n"));
  CHECK_THAT(text, Contains("pensieve_ttft_seconds_count 2\n"));
  CHECK_THAT(text, Contains("pensieve_turn_decode_seconds_count 2\n"));
  // The second turn reused the first's KV.
  CHECK(text.find("pensieve_cached_prompt_tokens_total 0\n") == std::string::npos);
}

TEST_CASE("a slow rpc token sink gets at most max_deltas_in_flight calls and the rest arrives coalesced", "[rpc]") {
  net::RpcServerOptions options;
  options.max_deltas_in_flight = 2;
  RpcFixture f(options);
  Client c(f.server->port());
  c.create("c");
  SinkLog log;
  log.hold = true;
  log.on_batch = [&](SinkLog& l) {
    if (l.held.size() + 1 < 2) return;
    // The window is full: let the engine finish the whole turn while this
    // sink answers nothing, then answer everything.
    f.server->wait_turns_ended();
    l.hold = false;
    for (auto& h : l.held) h->fulfill();
    l.held.clear();
  };
  auto r = c.turn("c", "Once upon a time", log, 200);
  CHECK(r.getSummary().getCompletionTokens() == 200);
  CHECK(log.tokens.size() == 200);
  CHECK(log.max_in_flight == 2);
  // Two calls filled the window; everything generated meanwhile came in one more.
  REQUIRE(log.batches.size() == 3);
  CHECK(log.batches[2].size() > 1);
  auto h = c.history("c");
  CHECK(std::string(h.getHistory()[1].getContent().cStr()) == log.text);
}

TEST_CASE("stopping the rpc server with a turn in flight cancels it and ends cleanly", "[rpc]") {
  IterationGate gate;
  RpcFixture f({}, &gate);
  Client c(f.server->port());
  c.create("c");
  SinkLog log;
  auto first = kj::newPromiseAndFulfiller<void>();
  log.on_batch = [&](SinkLog&) {
    if (log.batches.size() == 1) {
      gate.arm();
      first.fulfiller->fulfill();
    }
  };
  auto turn = c.turn_request("c", "Once upon a time", log, 400).send().getTurn();
  auto result = turn.resultRequest().send();
  first.promise.wait(c.ws());
  f.server->stop();  // joins the loop thread; dropping the turn has cancelled it
  gate.release();
  auto ended = kj::Exception::Type::FAILED;
  try {
    result.wait(c.ws());
  } catch (const kj::Exception& e) {
    ended = e.getType();
  }
  CHECK(ended == kj::Exception::Type::DISCONNECTED);
  f.server->wait_turns_ended();
  CHECK(f.stats().running == 0);
  auto snapshot = asio::co_spawn(f.io, f.engine->snapshot("", "c"), asio::use_future).get();
  REQUIRE(snapshot.has_value());
  CHECK(snapshot->turns == 1);
  CHECK(snapshot->messages.size() == 2);
  CHECK(snapshot->tokens.size() < 400);  // cancelled: far from its 400 tokens
  f.server->stop();  // idempotent
}

TEST_CASE("an rpc token sink that throws ends its turn with the sink's error and frees the engine", "[rpc]") {
  net::RpcServerOptions options;
  options.max_deltas_in_flight = 1;  // no second call before the first one's answer
  RpcFixture f(options);
  Client c(f.server->port());
  c.create("c");
  SinkLog log;
  log.fail = true;
  CHECK_THAT(rpc_error([&] { c.turn("c", "Once upon a time", log, 300); }),
             Contains("the token sink failed") && Contains("this sink refuses deltas"));
  CHECK(log.batches.size() == 1);  // nothing more was sent after the failure
  f.server->wait_turns_ended();
  CHECK(f.stats().running == 0);
}

namespace {

net::RpcServerOptions keyed_options() {
  auto keys = net::ApiKeys::parse("key-a alice\nkey-b bob\n", "test");
  REQUIRE(keys.has_value());
  net::RpcServerOptions o;
  o.keys = std::make_shared<const net::ApiKeys>(std::move(*keys));
  return o;
}

// Replaces the client's service by the one login(key) returns.
void login(Client& c, const std::string& key) {
  auto r = c.server.loginRequest();
  r.setKey(key);
  auto response = r.send().wait(c.ws());
  c.server = response.getService();
}

}  // namespace

TEST_CASE("with API keys an rpc client must log in, and a wrong key is refused", "[rpc][auth]") {
  RpcFixture f(keyed_options());
  Client c(f.server->port());
  CHECK_THAT(rpc_error([&] { c.create("x"); }), Contains("unauthenticated: call login(key) first"));
  CHECK_THAT(rpc_error([&] { c.list(); }), Contains("unauthenticated"));
  CHECK_THAT(rpc_error([&] { c.server.statsRequest().send().wait(c.ws()); }), Contains("unauthenticated"));
  SinkLog log;
  CHECK_THAT(rpc_error([&] { c.turn("x", "hi", log, 2); }), Contains("unauthenticated"));
  CHECK(log.batches.empty());
  CHECK_THAT(rpc_error([&] { login(c, "key-c"); }), Contains("unauthenticated: invalid API key"));
  CHECK_THAT(rpc_error([&] { login(c, ""); }), Contains("unauthenticated: invalid API key"));
  login(c, "key-a");
  CHECK(c.create("x") == "x");
  CHECK(f.engine->find_conversation("alice", "x").has_value());
  CHECK_FALSE(f.engine->find_conversation("", "x").has_value());
}

TEST_CASE("an rpc tenant cannot see or use another tenant's conversation", "[rpc][auth]") {
  RpcFixture f(keyed_options());
  Client alice(f.server->port());
  login(alice, "key-a");
  alice.create("mine");
  SinkLog log;
  CHECK(alice.turn("mine", "Once upon a time", log, 4).getSummary().getCompletionTokens() == 4);

  Client bob(f.server->port());
  login(bob, "key-b");
  CHECK(bob.list().empty());
  CHECK_THAT(rpc_error([&] { bob.history("mine"); }), Contains("not found"));
  SinkLog bob_log;
  CHECK_THAT(rpc_error([&] { bob.turn("mine", "hi", bob_log, 2); }), Contains("not found"));
  CHECK_THAT(rpc_error([&] {
               auto del = bob.server.deleteConversationRequest();
               del.setId("mine");
               del.send().wait(bob.ws());
             }),
             Contains("not found"));
  CHECK(alice.list() == std::vector<std::string>{"mine"});
}

TEST_CASE("without API keys login with any key returns the open service", "[rpc][auth]") {
  RpcFixture f;
  Client c(f.server->port());
  c.create("before");
  login(c, "whatever");
  CHECK(c.list() == std::vector<std::string>{"before"});
}

TEST_CASE("out-of-bounds turns are invalid_request errors over RPC, as on every front end",
          "[rpc][bounds]") {
  RpcFixture f;
  Client c(f.server->port());
  REQUIRE(c.create("c") == "c");
  for (const auto& t : testing::invalid_turns()) {
    if (t.has_role) continue;  // an RPC turn's message has no role
    INFO(t.field);
    SinkLog log;
    auto request = c.turn_request("c", "hi", log, 4);
    auto params = request.getParams();
    if (t.field == "temperature") params.setTemperature(float(t.number_value));
    if (t.field == "top_p") params.setTopP(float(t.number_value));
    if (t.field == "max_tokens") params.setMaxTokens(std::int32_t(t.number_value));
    // Cap'n Proto puts "remote exception: " before a server's description.
    CHECK_THAT(rpc_error([&] { request.send().wait(c.ws()); }),
               Catch::EndsWith("invalid request: " + t.message));
  }
}
