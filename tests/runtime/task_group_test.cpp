// TaskGroup: every child is cancelled by stop() and awaited; nothing outlives
// the group.
#include "runtime/executor.hpp"
#include "runtime/task_group.hpp"
#include "tests/runtime/actor_test_support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>

namespace {

namespace asio = boost::asio;
namespace rt = pensieve::rt;
using namespace std::chrono_literals;

// Waits an hour unless cancelled; counts how it ended.
asio::awaitable<void> wait_an_hour(std::atomic<int>& cancelled, std::atomic<int>& expired) {
  asio::steady_timer timer(co_await asio::this_coro::executor, 1h);
  auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  ++(ec ? cancelled : expired);
}

}  // namespace

TEST_CASE("stopping a task group cancels every child and waits for each to end") {
  rt::LoopThread other_thread;
  asio::io_context ctx{1};
  rt::TaskGroup group;
  std::atomic<int> cancelled{0};
  std::atomic<int> expired{0};
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> {
    for (int i = 0; i < 3; ++i) REQUIRE(group.spawn(ctx.get_executor(), wait_an_hour(cancelled, expired)));
    for (int i = 0; i < 2; ++i) {
      REQUIRE(group.spawn(other_thread.executor(), wait_an_hour(cancelled, expired)));
    }
    co_await asio::post(ctx, asio::use_awaitable);  // let the children start
    CHECK(group.size() == 5);
    co_await group.stop();
    CHECK(group.size() == 0);
    CHECK(cancelled == 5);  // all ended, before stop() returned
  });
  other_thread.join();
  CHECK(expired == 0);
}

TEST_CASE("waiting on a task group does not cancel its children") {
  asio::io_context ctx{1};
  rt::TaskGroup group;
  int finished = 0;
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> {
    for (int i = 0; i < 4; ++i) {
      group.spawn(ctx.get_executor(), [&finished, i]() -> asio::awaitable<void> {
        for (int k = 0; k < i; ++k) co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
        ++finished;
      });
    }
    co_await group.wait();
    CHECK(finished == 4);
    CHECK_FALSE(group.stopping());
  });
}

TEST_CASE("a stopped task group refuses new children") {
  asio::io_context ctx{1};
  rt::TaskGroup group;
  bool ran = false;
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> {
    co_await group.stop();
    CHECK_FALSE(group.spawn(ctx.get_executor(), [&ran]() -> asio::awaitable<void> {
      ran = true;
      co_return;
    }));
  });
  CHECK_FALSE(ran);
}

TEST_CASE("a child's exception is rethrown by the group's wait") {
  asio::io_context ctx{1};
  rt::TaskGroup group;
  bool rethrown = false;
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> {
    group.spawn(ctx.get_executor(), []() -> asio::awaitable<void> {
      co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
      throw std::runtime_error("broken invariant");
    });
    try {
      co_await group.wait();
    } catch (const std::runtime_error& e) {
      rethrown = std::string(e.what()) == "broken invariant";
    }
  });
  CHECK(rethrown);
}
