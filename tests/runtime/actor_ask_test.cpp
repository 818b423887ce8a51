// ask: a request carries its reply slot; the asker gets the value, or learns
// that it timed out, was cancelled, found the actor stopped, or was dropped.
#include "runtime/actor.hpp"
#include "tests/runtime/actor_test_support.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace rt = pensieve::rt;
using namespace std::chrono_literals;

struct Double {
  int value = 0;
  rt::Reply<int> reply;
};
// Kept unanswered by the server for as long as it lives.
struct Hold {
  std::shared_ptr<int> token;  // tells the test when the request is gone
  rt::Reply<int> reply;
};
// Dropped by the server without an answer.
struct Drop {
  rt::Reply<int> reply;
};
// Answers every held request.
struct Release {};
using ServerMsg = std::variant<Double, Hold, Drop, Release>;

struct Server {
  std::vector<Hold> held;
  void operator()(Double m) { m.reply.send(2 * m.value); }
  void operator()(Hold m) { held.push_back(std::move(m)); }
  void operator()(Drop) {}
  void operator()(Release) {
    for (auto& h : held) h.reply.send(1);
    held.clear();
  }
};

rt::ActorRef<ServerMsg> spawn_server(rt::TaskGroup& group, asio::io_context& ctx) {
  return rt::spawn_actor<ServerMsg>(group, ctx.get_executor(), Server{}, {.name = "server"});
}

}  // namespace

TEST_CASE("ask returns the actor's reply") {
  asio::io_context ctx{1};
  rt::TaskGroup group;
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> {
    auto server = spawn_server(group, ctx);
    Double first{21};  // named: see "GCC 12" in runtime/actor.hpp
    Double second{-4};
    auto plain = co_await server.ask(std::move(first));
    auto timed = co_await server.ask(std::move(second), 1s);
    REQUIRE(plain.has_value());
    REQUIRE(timed.has_value());
    CHECK(*plain == 42);
    CHECK(*timed == -8);
    co_await group.stop();
  });
}

TEST_CASE("an ask the actor never answers times out, and nothing of it is left") {
  asio::io_context ctx{1};
  rt::TaskGroup group;
  std::weak_ptr<int> request_alive;
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> {
    auto server = spawn_server(group, ctx);
    auto token = std::make_shared<int>(7);
    request_alive = token;
    Hold hold{std::move(token)};
    auto r = co_await server.ask(std::move(hold), 5ms);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error() == rt::AskError::timed_out);
    CHECK_FALSE(request_alive.expired());  // the server still holds it
    // The server answers the next ask, so the timed-out one did not wedge it.
    Double one{1};
    auto next = co_await server.ask(std::move(one), 1s);
    CHECK(next.value() == 2);
    co_await server.stop(rt::StopMode::drain);
    co_await group.wait();
  });
  // The held request (and its reply slot) went with the server's state; the
  // timer and the ask's inner coroutine are gone too, or run() would not return.
  CHECK(request_alive.expired());
}

TEST_CASE("an ask cancelled by its caller ends with cancelled") {
  const bool with_timeout = GENERATE(false, true);
  CAPTURE(with_timeout);
  asio::io_context ctx{1};
  rt::TaskGroup group;
  auto server = spawn_server(group, ctx);
  std::optional<rt::AskResult<int>> outcome;
  asio::cancellation_signal cancel;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        Hold hold;
        if (with_timeout) {
          outcome = co_await server.ask(std::move(hold), 1h);
        } else {
          outcome = co_await server.ask(std::move(hold));
        }
      },
      asio::bind_cancellation_slot(cancel.slot(), [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      }));
  ctx.poll();
  REQUIRE_FALSE(outcome.has_value());  // the server holds the request
  cancel.emit(asio::cancellation_type::terminal);
  ctx.poll();
  REQUIRE(outcome.has_value());
  REQUIRE_FALSE(outcome->has_value());
  CHECK(outcome->error() == rt::AskError::cancelled);
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> { co_await group.stop(); });
}

TEST_CASE("an ask to a stopped actor says the actor stopped") {
  asio::io_context ctx{1};
  rt::TaskGroup group;
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> {
    auto server = spawn_server(group, ctx);
    co_await server.stop(rt::StopMode::drain);
    Double first{1};
    Double second{1};
    auto plain = co_await server.ask(std::move(first));
    auto timed = co_await server.ask(std::move(second), 1s);
    CHECK(plain.error() == rt::AskError::actor_stopped);
    CHECK(timed.error() == rt::AskError::actor_stopped);
    co_await group.wait();
  });
}

TEST_CASE("a request the actor drops without answering yields no_reply") {
  asio::io_context ctx{1};
  rt::TaskGroup group;
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> {
    auto server = spawn_server(group, ctx);
    Drop drop;
    auto r = co_await server.ask(std::move(drop), 1s);
    CHECK(r.error() == rt::AskError::no_reply);
    co_await group.stop();
  });
}

TEST_CASE("value() on a failed ask throws with the reason") {
  auto failed = rt::ask_error<int>(rt::AskError::timed_out);
  CHECK_THROWS_WITH(failed.value(), "ask failed: timed out");
}

// The answering actor's thread used to drop the last reference to the reply
// channel, which is bound to the asker's io_context: destroying it there
// after that context was gone was a heap-use-after-free (ASan, 2026-12-01,
// test_actors '[sampling]': a GetSnapshot reply outran its asker's context).
// Here the asker's context is destroyed for certain before the answer.
TEST_CASE("an actor that answers after its asker's io_context is gone touches nothing of that context") {
  asio::io_context server_ctx{1};
  rt::TaskGroup group;
  auto server = spawn_server(group, server_ctx);
  std::weak_ptr<int> request_alive;
  {
    asio::io_context asker{1};
    asio::cancellation_signal cancel;
    std::optional<rt::AskResult<int>> outcome;
    auto token = std::make_shared<int>(7);
    request_alive = token;
    asio::co_spawn(
        asker,
        [&, token = std::move(token)]() mutable -> asio::awaitable<void> {
          Hold hold{std::move(token)};
          outcome = co_await server.ask(std::move(hold));
        },
        asio::bind_cancellation_slot(cancel.slot(), [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        }));
    asker.poll();       // the request is in the server's mailbox
    server_ctx.poll();  // and the server holds it
    REQUIRE_FALSE(request_alive.expired());
    cancel.emit(asio::cancellation_type::terminal);
    asker.poll();
    REQUIRE(outcome.has_value());
    CHECK(outcome->error() == rt::AskError::cancelled);
  }  // the asker's context is destroyed here, its request still held
  REQUIRE_FALSE(request_alive.expired());
  REQUIRE(server.try_tell(ServerMsg{Release{}}) == rt::SendStatus::sent);
  server_ctx.poll();  // the answer goes nowhere, and frees only its own memory
  CHECK(request_alive.expired());
  rt::test::run_body(server_ctx, [&]() -> asio::awaitable<void> { co_await group.stop(); });
}
