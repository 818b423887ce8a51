#include "net/turn_call.hpp"

#include "net/tenant_limits.hpp"
#include "runtime/clock.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <cmath>
#include <vector>

namespace pensieve::net {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using actors::TurnError;
using actors::TurnErrorKind;

actors::EngineResult<TurnCall> TurnCall::start(actors::Engine& engine,
                                               const asio::any_io_executor& executor,
                                               actors::TurnRequest request,
                                               const RequestLimits& limits) {
  if (auto problem = validate_turn(request, limits)) return *problem;
  std::shared_ptr<const void> permit;
  if (limits.tenant_turns) {
    permit = limits.tenant_turns->try_acquire(request.tenant);
    if (!permit) {
      return TurnError{TurnErrorKind::rate_limited,
                       "this API key has " + std::to_string(limits.tenant_turns->max_turns()) +
                           " turns running, its limit; retry when one has ended"};
    }
  }
  auto stream = engine.start(executor, std::move(request));
  if (!stream) return stream.error();
  return TurnCall(std::move(*stream), std::move(permit));
}

asio::awaitable<actors::TurnResult> TurnCall::drain(TurnWrite write, TurnCallOptions options) {
  const auto executor = co_await asio::this_coro::executor;
  // The request timeout cancels the turn; the result says why.
  auto timed_out = std::make_shared<bool>(false);
  asio::steady_timer timer(executor);
  if (options.timeout != std::chrono::milliseconds::max()) {
    timer.expires_after(options.timeout);
    timer.async_wait([weak = std::weak_ptr<actors::TurnStream>(stream_),
                      timed_out](boost::system::error_code ec) {
      if (ec) return;
      *timed_out = true;
      if (auto s = weak.lock()) s->cancel();
    });
  }
  ServerMetrics* metrics = options.metrics;
  const auto start = Clock::now();
  auto last = start;
  bool first = true;
  bool listening = true;
  // The deltas that go out in one write: the one awaited and every one queued
  // behind it (the engine got ahead of the socket), each with its time.
  std::vector<actors::TurnDelta> batch;
  std::vector<std::int64_t> computed_ns;
  auto take = [&](actors::TurnDelta& d) {
    if (metrics) {
      const auto now = Clock::now();
      if (first) {
        metrics->ttft(std::chrono::duration<double>(now - start).count());
      } else {
        metrics->inter_token(std::chrono::duration<double>(now - last).count());
      }
      last = now;
    }
    first = false;
    if (!listening) return;  // cancelled: drain to the turn's end
    computed_ns.push_back(d.computed_ns);
    batch.push_back(std::move(d));
  };
  for (;;) {
    batch.clear();
    computed_ns.clear();
    auto d = co_await stream_->next();
    if (!d) break;
    const std::int64_t taken_ns = rt::steady_now_ns();
    take(*d);
    for (auto more = stream_->try_next(); more; more = stream_->try_next()) take(*more);
    if (batch.empty()) continue;
    const bool keep_going = co_await write(std::span(batch));  // its own statement: GCC 12
    if (metrics && keep_going) {
      // Every delta's own sample, taken at the write that carried it.
      const std::int64_t written_ns = rt::steady_now_ns();
      for (const std::int64_t c : computed_ns) {
        if (c > 0)
          metrics->frontend_latency(double(written_ns - c) * 1e-9, double(taken_ns - c) * 1e-9);
      }
    }
    if (!keep_going) {
      listening = false;
      stream_->cancel();
    }
  }
  timer.cancel();
  const actors::TurnResult& result = stream_->result();
  if (!result) co_return result.error();
  if (*timed_out) {
    co_return TurnError{
        TurnErrorKind::timeout,
        "the request timed out after " + std::to_string(options.timeout.count()) + " ms"};
  }
  if (metrics) {
    metrics->tokens(result->prompt_tokens, result->completion_tokens, result->cached_tokens);
    metrics->turn_phases(result->timings);
  }
  co_return *result;
}

}  // namespace pensieve::net
