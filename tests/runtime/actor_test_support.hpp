#pragma once
// Helpers shared by the actor tests: run a test body as a coroutine and
// rethrow what it threw; a gate a handler can wait on; the message count,
// scaled down under sanitizers.
#include "runtime/mailbox.hpp"
#include "tests/under_sanitizer.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <exception>
#include <stdexcept>

namespace pensieve::rt::test {

namespace asio = boost::asio;

using pensieve::testing::under_sanitizer;

// 10^6 normally; 10^5 under a sanitizer, which is 5-20x slower.
inline constexpr std::uint64_t million_or_less = under_sanitizer ? 100'000 : 1'000'000;

// Spawns `body` on `ctx` and returns a flag set when it completed; its
// exception, if any, is rethrown by rethrow_if_failed().
struct Outcome {
  bool done = false;
  std::exception_ptr error;
  void rethrow_if_failed() const {
    if (error) std::rethrow_exception(error);
  }
};

template <class Body>
void spawn_body(asio::io_context& ctx, Outcome& outcome, Body body) {
  asio::co_spawn(ctx, std::move(body), [&outcome](std::exception_ptr e) {
    outcome.done = true;
    outcome.error = e;
  });
}

// Runs `body` to completion on `ctx` (on this thread) and rethrows its failure.
template <class Body>
void run_body(asio::io_context& ctx, Body body) {
  Outcome outcome;
  spawn_body(ctx, outcome, std::move(body));
  ctx.run();
  outcome.rethrow_if_failed();
  if (!outcome.done) throw std::logic_error("the test body never finished");
}

// A gate a handler waits on until the test opens it.
class Gate {
 public:
  explicit Gate(const asio::any_io_executor& executor) : mailbox_(executor, 1) {}
  asio::awaitable<void> pass() { (void)co_await mailbox_.receive(); }
  void open() { mailbox_.close(); }

 private:
  Mailbox<int> mailbox_;
};

}  // namespace pensieve::rt::test
