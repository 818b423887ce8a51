#include "net/turn_call.hpp"

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

namespace {

std::string number_text(double d) {
  std::string s = std::to_string(d);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

std::optional<TurnError> invalid(std::string param, std::string what) {
  return TurnError{TurnErrorKind::invalid_request, "'" + param + "' " + what, std::move(param)};
}

std::optional<TurnError> in_range(std::string param, double v, double lo, double hi) {
  if (std::isfinite(v) && v >= lo && v <= hi) return std::nullopt;
  return invalid(std::move(param),
                 "must be between " + number_text(lo) + " and " + number_text(hi));
}

std::optional<TurnError> validate_sampling(const model::SamplingParams& s,
                                           const RequestLimits& limits) {
  if (auto e = in_range("max_tokens", s.max_tokens, 1, limits.max_tokens_ceiling)) return e;
  if (auto e = in_range("min_tokens", s.min_tokens, 0, limits.max_tokens_ceiling)) return e;
  if (auto e = in_range("temperature", s.temperature, 0.0, 2.0)) return e;
  if (auto e = in_range("top_p", s.top_p, 0.0, 1.0)) return e;
  if (s.top_p == 0.0f) return invalid("top_p", "must be greater than 0");
  if (auto e = in_range("top_k", s.top_k, 0, 1 << 20)) return e;
  if (auto e = in_range("min_p", s.min_p, 0.0, 1.0)) return e;
  if (auto e = in_range("presence_penalty", s.presence_penalty, -2.0, 2.0)) return e;
  if (auto e = in_range("frequency_penalty", s.frequency_penalty, -2.0, 2.0)) return e;
  if (auto e = in_range("repetition_penalty", s.repetition_penalty, 0.01, 10.0)) return e;
  if (auto e = in_range("top_logprobs", s.top_logprobs, 0, 20)) return e;
  if (s.top_logprobs > 0 && !s.logprobs)
    return invalid("top_logprobs", "requires 'logprobs': true");
  if (s.min_tokens > s.max_tokens) return invalid("min_tokens", "exceeds 'max_tokens'");
  if (s.stop_strings.size() > limits.max_stop_strings) {
    return invalid("stop",
                   "allows at most " + std::to_string(limits.max_stop_strings) + " strings");
  }
  for (const auto& stop : s.stop_strings) {
    if (stop.empty()) return invalid("stop", "strings must not be empty");
  }
  return std::nullopt;
}

}  // namespace

std::optional<TurnError> validate_turn(const actors::TurnRequest& r, const RequestLimits& limits) {
  if (auto e = validate_sampling(r.sampling, limits)) return e;
  if (r.prompt) return std::nullopt;
  if (r.messages.empty()) return invalid("messages", "must not be empty");
  if (r.messages.size() > limits.max_messages) {
    return invalid("messages", "has more than " + std::to_string(limits.max_messages) + " entries");
  }
  for (std::size_t i = 0; i < r.messages.size(); ++i) {
    const std::string& role = r.messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return invalid("messages[" + std::to_string(i) + "].role",
                     "must be system, user or assistant");
    }
  }
  return std::nullopt;
}

actors::TurnRequest turn_request(const ChatRequest& r, std::uint64_t seed) {
  actors::TurnRequest t;
  t.tenant = r.tenant;
  t.conversation = r.conversation_id;
  t.prompt = r.prompt;
  for (const auto& m : r.messages) t.messages.push_back({m.role, m.content});
  model::SamplingParams& p = t.sampling;
  p.temperature = r.temperature;
  p.top_k = r.top_k;
  p.top_p = r.top_p;
  p.min_p = r.min_p;
  p.repetition_penalty = r.repetition_penalty;
  p.presence_penalty = r.presence_penalty;
  p.frequency_penalty = r.frequency_penalty;
  p.seed = r.seed ? *r.seed : seed;
  p.logprobs = r.logprobs;
  p.top_logprobs = r.top_logprobs;
  p.stop_strings = r.stop;
  p.max_tokens = r.max_tokens;
  p.min_tokens = r.min_tokens;
  p.ignore_eos = r.ignore_eos;
  return t;
}

const ErrorProtocol& error_protocol(TurnErrorKind kind) {
  static constexpr ErrorProtocol invalid_request{
      400, "invalid_request_error", "", "invalid_request", false, "invalid request"};
  static constexpr ErrorProtocol not_found{
      404, "invalid_request_error", "not_found", "not_found", false, "not found"};
  static constexpr ErrorProtocol overloaded{503,          "server_error", "overloaded",
                                            "overloaded", true,           "overloaded"};
  static constexpr ErrorProtocol timeout{504,       "server_error", "timeout",
                                         "timeout", false,          "timeout"};
  static constexpr ErrorProtocol internal{500, "server_error", "", "internal", false, "internal"};
  switch (kind) {
    case TurnErrorKind::invalid_request:
      return invalid_request;
    case TurnErrorKind::not_found:
      return not_found;
    case TurnErrorKind::overloaded:
      return overloaded;
    case TurnErrorKind::timeout:
      return timeout;
    case TurnErrorKind::internal:
      break;
  }
  return internal;
}

ApiError api_error(const TurnError& e) {
  const ErrorProtocol& p = error_protocol(e.kind);
  return ApiError{p.http_status, std::string(p.openai_type), e.message, e.param,
                  std::string(p.openai_code)};
}

actors::EngineResult<TurnCall> TurnCall::start(actors::Engine& engine,
                                               const asio::any_io_executor& executor,
                                               actors::TurnRequest request,
                                               const RequestLimits& limits) {
  if (auto problem = validate_turn(request, limits)) return *problem;
  auto stream = engine.start(executor, std::move(request));
  if (!stream) return stream.error();
  return TurnCall(std::move(*stream));
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
  if (metrics)
    metrics->tokens(result->prompt_tokens, result->completion_tokens, result->cached_tokens);
  co_return *result;
}

}  // namespace pensieve::net
