#include "bench/engine-bench/replay.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

namespace pensieve::bench {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

asio::awaitable<void> sleep_s(double s) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  t.expires_after(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(0.0, s))));
  co_await t.async_wait(asio::use_awaitable);
}

asio::awaitable<void> play(actors::Engine& engine, std::size_t index, std::vector<std::string> turns,
                           const ReplayOptions& o, Clock::time_point t0, std::vector<TurnSample>& out) {
  co_await sleep_s(double(index) * o.stagger_s);
  const std::string id = "bench-" + std::to_string(index);
  if (!o.stateless && !engine.create_conversation("bench", id)) co_return;
  std::vector<model::ChatMessage> history;  // a stateless client's
  const auto thinks = think_times(index, turns.size(), o);
  for (std::size_t t = 0; t < turns.size(); ++t) {
    if (t > 0) co_await sleep_s(thinks[t]);
    TurnSample sample;
    sample.conversation = index;
    sample.turn = t;
    const auto start = Clock::now();
    bool first = true;
    actors::TurnSink sink = [&](const actors::TurnDelta& delta) -> asio::awaitable<bool> {
      sample.text += delta.text;
      if (first) {
        sample.ttft_s = seconds(Clock::now() - start);
        first = false;
      }
      co_return true;
    };
    model::SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = o.max_tokens;
    p.ignore_eos = true;
    actors::TurnRequest request{.tenant = "bench",
                                .conversation = id,
                                .create_conversation = false,
                                .messages = {{"user", turns[t]}},
                                .sampling = p};
    if (o.stateless) {
      history.push_back({"user", turns[t]});
      request.conversation.reset();
      request.messages = history;
    }
    const auto executor = co_await asio::this_coro::executor;
    auto stream = engine.start(executor, std::move(request));
    actors::TurnResult r =
        stream ? actors::TurnResult(actors::TurnError{}) : actors::TurnResult(stream.error());
    if (stream) r = co_await actors::drain_turn(std::move(*stream), sink);
    sample.latency_s = seconds(Clock::now() - start);
    if (r) {
      sample.ok = true;
      sample.prompt_tokens = r->prompt_tokens;
      sample.cached_tokens = r->cached_tokens;
      sample.completion_tokens = r->completion_tokens;
    } else {
      sample.error = r.error().message;
    }
    (void)t0;
    if (o.stateless) history.push_back({"assistant", sample.text});
    out.push_back(std::move(sample));
    if (!r) co_return;
  }
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const auto lo = std::size_t(std::floor(pos));
  const auto hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

}  // namespace

std::vector<double> think_times(std::size_t conversation, std::size_t turns, const ReplayOptions& o) {
  std::mt19937_64 rng(o.seed * 1000003 + conversation);
  std::vector<double> out;
  for (std::size_t i = 0; i < turns; ++i) {
    const double u = double(rng() >> 11) * 0x1.0p-53;  // [0, 1), not the library's distribution
    out.push_back(-std::log(1.0 - u) * o.think_time_s);
  }
  return out;
}

ReplayResult replay(asio::io_context& io, actors::Engine& engine,
                    const std::vector<std::vector<std::string>>& conversations, const ReplayOptions& options) {
  ReplayResult result;
  io.restart();
  const auto t0 = Clock::now();
  std::vector<std::future<void>> done;
  for (std::size_t i = 0; i < conversations.size(); ++i) {
    done.push_back(asio::co_spawn(io, play(engine, i, conversations[i], options, t0, result.turns), asio::use_future));
  }
  io.run();
  for (auto& f : done) f.get();
  result.makespan_s = seconds(Clock::now() - t0);
  io.restart();
  auto stats = asio::co_spawn(io, engine.stats(), asio::use_future);
  io.run();
  result.scheduler = stats.get();
  for (std::size_t i = 0; i < conversations.size() && !options.stateless; ++i) {
    engine.delete_conversation("bench", "bench-" + std::to_string(i));
  }
  return result;
}

ReplaySummary summarize(const ReplayResult& r) {
  ReplaySummary s;
  std::vector<double> ttft, latency;
  double normalized = 0, tokens = 0;
  for (const auto& t : r.turns) {
    ++s.turns;
    if (!t.ok) {
      ++s.failed;
      continue;
    }
    ttft.push_back(t.ttft_s);
    latency.push_back(t.latency_s);
    tokens += t.completion_tokens;
    if (t.completion_tokens > 0) normalized += t.latency_s / t.completion_tokens;
  }
  const double ok = double(ttft.size());
  s.output_tokens_per_s = r.makespan_s > 0 ? tokens / r.makespan_s : 0;
  s.turns_per_s = r.makespan_s > 0 ? ok / r.makespan_s : 0;
  s.ttft_p50_s = percentile(ttft, 0.5);
  s.ttft_p99_s = percentile(ttft, 0.99);
  s.latency_p50_s = percentile(latency, 0.5);
  s.mean_normalized_latency_s = ok > 0 ? normalized / ok : 0;
  s.prefill_tokens = r.scheduler.prefill_tokens;
  s.reused_tokens = r.scheduler.reused_tokens;
  return s;
}

}  // namespace pensieve::bench
