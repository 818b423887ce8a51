// Two actors exchange 10^6 pings and pongs with many in flight, on one thread
// and across two threads: none is lost, each arrives in its sender's order.
#include "runtime/actor.hpp"
#include "runtime/executor.hpp"
#include "tests/runtime/actor_test_support.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <variant>

namespace {

namespace asio = boost::asio;
namespace rt = pensieve::rt;
using rt::test::million_or_less;

struct Ping {
  std::uint64_t seq = 0;
};
struct Pong {
  std::uint64_t seq = 0;
};
using PongerMsg = std::variant<Ping>;

struct Start {
  rt::ActorRef<PongerMsg> ponger;
};
struct AwaitDone {
  rt::Reply<std::uint64_t> reply;  // answered with the number of pongs once all came back
};
using PingerMsg = std::variant<Start, Pong, AwaitDone>;

// Errors are counted (one Errors per actor), not asserted: Catch2 assertions
// belong to the test's thread.
struct Errors {
  std::uint64_t out_of_order = 0;
  std::uint64_t refused = 0;
};

// Answers each ping with a pong carrying the same number.
struct Ponger {
  rt::ActorRef<PingerMsg> pinger;
  Errors* errors;
  std::uint64_t expected = 0;

  void operator()(Ping ping) {
    if (ping.seq != expected++) ++errors->out_of_order;
    // The pinger keeps at most `window` pings in flight, fewer than its
    // mailbox holds, so a pong always finds room.
    if (pinger.try_tell(Pong{ping.seq}) != rt::SendStatus::sent) ++errors->refused;
  }
};

// Keeps `window` pings in flight until `total` pongs came back.
struct Pinger {
  std::uint64_t total;
  std::uint64_t window;
  Errors* errors;
  rt::ActorRef<PongerMsg> ponger;
  std::uint64_t sent = 0;
  std::uint64_t pongs = 0;
  rt::Reply<std::uint64_t> done;

  void operator()(Start start) {
    ponger = start.ponger;
    while (sent < window && sent < total) send_ping();
  }
  void operator()(Pong pong) {
    if (pong.seq != pongs++) ++errors->out_of_order;
    if (sent < total) send_ping();
    if (pongs == total && done.pending()) done.send(pongs);
  }
  void operator()(AwaitDone request) {
    done = std::move(request.reply);
    if (pongs == total) done.send(pongs);
  }
  void send_ping() {
    if (ponger.try_tell(Ping{sent++}) != rt::SendStatus::sent) ++errors->refused;
  }
};

struct PingPongResult {
  std::uint64_t pongs = 0;
  rt::ActorStats pinger;
  rt::ActorStats ponger;
};

// Runs the exchange with the pinger on `ctx` (this thread) and the ponger on
// `ponger_executor`.
template <class Executor>
PingPongResult run_ping_pong(asio::io_context& ctx, const Executor& ponger_executor,
                             std::uint64_t total, Errors& pinger_errors, Errors& ponger_errors) {
  constexpr std::uint64_t window = 64;
  rt::TaskGroup group;
  PingPongResult result;
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> {
    auto pinger = rt::spawn_actor<PingerMsg>(group, ctx.get_executor(),
                                             Pinger{total, window, &pinger_errors, {}},
                                             {.name = "pinger", .mailbox_capacity = 2 * window});
    auto ponger = rt::spawn_actor<PongerMsg>(group, ponger_executor, Ponger{pinger, &ponger_errors},
                                             {.name = "ponger", .mailbox_capacity = 2 * window});
    // Named, not temporaries: see "GCC 12" in runtime/actor.hpp.
    Start start{ponger};
    AwaitDone await_done;
    // Never co_await inside a Catch2 macro: GCC 12 mis-compiles it.
    const rt::SendStatus started = co_await pinger.tell(std::move(start));
    CHECK(started == rt::SendStatus::sent);
    auto done = co_await pinger.ask(std::move(await_done));
    result.pongs = done.value();
    co_await ponger.stop(rt::StopMode::drain);
    co_await pinger.stop(rt::StopMode::drain);
    co_await group.wait();
    result.pinger = pinger.stats();
    result.ponger = ponger.stats();
  });
  return result;
}

}  // namespace

TEST_CASE("two actors on one thread exchange a million pings, none lost, each in order") {
  asio::io_context ctx{1};
  Errors pinger_errors;
  Errors ponger_errors;
  const std::uint64_t total = million_or_less;
  PingPongResult r = run_ping_pong(ctx, ctx.get_executor(), total, pinger_errors, ponger_errors);
  CHECK(r.pongs == total);
  CHECK(pinger_errors.out_of_order == 0);
  CHECK(ponger_errors.out_of_order == 0);
  CHECK(pinger_errors.refused == 0);
  CHECK(ponger_errors.refused == 0);
  CHECK(r.ponger.handled == total);
  CHECK(r.pinger.handled == total + 2);  // the pongs, Start and AwaitDone
  CHECK(r.ponger.rejected == 0);
  CHECK(r.pinger.rejected == 0);
}

TEST_CASE("two actors on two threads exchange a million pings, none lost, each in order") {
  rt::LoopThread ponger_thread;
  asio::io_context ctx{1};
  Errors pinger_errors;
  Errors ponger_errors;
  const std::uint64_t total = million_or_less;
  PingPongResult r = run_ping_pong(ctx, ponger_thread.executor(), total, pinger_errors, ponger_errors);
  ponger_thread.join();
  CHECK(r.pongs == total);
  CHECK(pinger_errors.out_of_order == 0);
  CHECK(ponger_errors.out_of_order == 0);
  CHECK(pinger_errors.refused == 0);
  CHECK(ponger_errors.refused == 0);
  CHECK(r.ponger.handled == total);
  CHECK(r.pinger.handled == total + 2);
}
