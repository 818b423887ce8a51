// Actor messaging: round-trip latency (one message in flight), streaming
// throughput (tell+receive with the mailbox kept busy) and ask round trips,
// between two actors on one thread and on two threads.
//
// Each benchmark iteration is one round trip (or one message, or one ask);
// batches of them run from start to end on fresh actors, so setup is amortised.
#include "runtime/actor.hpp"
#include "runtime/executor.hpp"

#include <benchmark/benchmark.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <variant>

namespace {

namespace asio = boost::asio;
namespace rt = pensieve::rt;
using namespace std::chrono_literals;

constexpr std::int64_t batch = 20'000;

struct Ping {
  std::uint64_t seq = 0;
};
struct Pong {
  std::uint64_t seq = 0;
};
using EchoMsg = std::variant<Ping>;
struct Start {
  rt::ActorRef<EchoMsg> echo;
};
struct AwaitDone {
  rt::Reply<std::uint64_t> reply;
};
using DriverMsg = std::variant<Start, Pong, AwaitDone>;

struct Echo {
  rt::ActorRef<DriverMsg> driver;
  void operator()(Ping ping) { (void)driver.try_tell(Pong{ping.seq}); }
};

// Keeps `window` pings in flight until `total` pongs came back.
struct Driver {
  std::uint64_t total;
  std::uint64_t window;
  rt::ActorRef<EchoMsg> echo;
  std::uint64_t sent = 0;
  std::uint64_t pongs = 0;
  rt::Reply<std::uint64_t> done;

  void operator()(Start start) {
    echo = start.echo;
    while (sent < window && sent < total) (void)echo.try_tell(Ping{sent++});
  }
  void operator()(Pong) {
    ++pongs;
    if (sent < total) (void)echo.try_tell(Ping{sent++});
    if (pongs == total && done.pending()) done.send(pongs);
  }
  void operator()(AwaitDone request) {
    done = std::move(request.reply);
    if (pongs == total) done.send(pongs);
  }
};

// Runs `body` on `ctx` to completion, on this thread.
template <class Body>
void run_on(asio::io_context& ctx, Body body) {
  std::exception_ptr error;
  asio::co_spawn(ctx, std::move(body), [&error](std::exception_ptr e) { error = e; });
  ctx.restart();
  ctx.run();
  if (error) std::rethrow_exception(error);
}

template <class Executor>
void ping_pong(asio::io_context& ctx, const Executor& echo_executor, std::uint64_t total,
               std::uint64_t window) {
  rt::TaskGroup group;
  run_on(ctx, [&]() -> asio::awaitable<void> {
    auto driver = rt::spawn_actor<DriverMsg>(group, ctx.get_executor(), Driver{total, window, {}},
                                             {.name = "driver", .mailbox_capacity = 2 * window});
    auto echo = rt::spawn_actor<EchoMsg>(group, echo_executor, Echo{driver},
                                         {.name = "echo", .mailbox_capacity = 2 * window});
    Start start{echo};  // named: GCC 12 and aggregate temporaries in co_await
    AwaitDone await_done;
    (void)co_await driver.tell(std::move(start));
    auto pongs = co_await driver.ask(std::move(await_done));
    if (pongs.value() != total) throw std::logic_error("lost pongs");
    co_await group.stop();
  });
}

// One message in flight: the latency of a round trip (two tell+receive).
void BM_ActorRoundTrip(benchmark::State& state) {
  const bool two_threads = state.range(0) == 2;
  asio::io_context ctx{1};
  std::optional<rt::LoopThread> other;
  if (two_threads) other.emplace();
  while (state.KeepRunningBatch(batch)) {
    if (two_threads) {
      ping_pong(ctx, other->executor(), batch, 1);
    } else {
      ping_pong(ctx, ctx.get_executor(), batch, 1);
    }
  }
  state.counters["tell_receive"] =
      benchmark::Counter(static_cast<double>(2 * state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ActorRoundTrip)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();

// 64 pings in flight: messages per second when the mailboxes never run dry.
void BM_ActorPipelined(benchmark::State& state) {
  const bool two_threads = state.range(0) == 2;
  asio::io_context ctx{1};
  std::optional<rt::LoopThread> other;
  if (two_threads) other.emplace();
  while (state.KeepRunningBatch(batch)) {
    if (two_threads) {
      ping_pong(ctx, other->executor(), batch, 64);
    } else {
      ping_pong(ctx, ctx.get_executor(), batch, 64);
    }
  }
  state.SetItemsProcessed(2 * state.iterations());  // pings and pongs
  state.counters["tell_receive"] =
      benchmark::Counter(static_cast<double>(2 * state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ActorPipelined)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime();

struct Twice {
  std::uint64_t value = 0;
  rt::Reply<std::uint64_t> reply;
};
using ServerMsg = std::variant<Twice>;
struct Server {
  void operator()(Twice m) { m.reply.send(2 * m.value); }
};

// A coroutine asking an actor, one ask at a time; range(1) = 1 adds a timeout.
void BM_ActorAsk(benchmark::State& state) {
  const bool two_threads = state.range(0) == 2;
  const bool with_timeout = state.range(1) == 1;
  asio::io_context ctx{1};
  std::optional<rt::LoopThread> other;
  if (two_threads) other.emplace();
  while (state.KeepRunningBatch(batch)) {
    rt::TaskGroup group;
    run_on(ctx, [&]() -> asio::awaitable<void> {
      auto server = two_threads ? rt::spawn_actor<ServerMsg>(group, other->executor(), Server{})
                                : rt::spawn_actor<ServerMsg>(group, ctx.get_executor(), Server{});
      for (std::uint64_t i = 0; i < batch; ++i) {
        Twice request{i};
        auto answer = with_timeout ? co_await server.ask(std::move(request), 1s)
                                   : co_await server.ask(std::move(request));
        if (answer.value() != 2 * i) throw std::logic_error("wrong answer");
      }
      co_await group.stop();
    });
  }
}
BENCHMARK(BM_ActorAsk)
    ->ArgNames({"threads", "timeout"})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({2, 0})
    ->Args({2, 1})
    ->UseRealTime();

}  // namespace
