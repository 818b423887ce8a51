#include "bench/engine-bench/shared_prompt.hpp"

#include "actors/engine.hpp"
#include "gpu/model/model_loader.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <vector>

namespace pensieve::bench {

namespace asio = boost::asio;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Sample {
  double ttft_s = 0, latency_s = 0;
  std::int32_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  std::string text;
  std::string error;
};

enum class Mode { shared, separate, no_state };

asio::awaitable<Sample> one_turn(actors::Engine& engine, std::string tenant, std::string id, std::string system,
                                 std::string question, std::int32_t max_tokens) {
  Sample s;
  const auto start = Clock::now();
  bool first = true;
  actors::TurnSink sink = [&](const actors::TurnDelta& d) -> asio::awaitable<bool> {
    if (first) s.ttft_s = seconds(Clock::now() - start);
    first = false;
    s.text += d.text;
    co_return true;
  };
  model::SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  actors::TurnRequest request{.tenant = std::move(tenant),
                              .conversation = std::move(id),
                              .messages = {{"system", std::move(system)}, {"user", std::move(question)}},
                              .sampling = p};
  auto stream = engine.start(co_await asio::this_coro::executor, std::move(request));
  if (!stream) {
    s.error = stream.error().message;
    co_return s;
  }
  auto r = co_await actors::drain_turn(std::move(*stream), sink);
  s.latency_s = seconds(Clock::now() - start);
  if (!r) {
    s.error = r.error().message;
    co_return s;
  }
  s.prompt_tokens = r->prompt_tokens;
  s.cached_tokens = r->cached_tokens;
  s.completion_tokens = r->completion_tokens;
  co_return s;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, std::size_t(q * double(v.size() - 1) + 0.5))];
}

std::string question(std::size_t i) {
  return "Which book would you suggest for reader number " + std::to_string(i) + ", and why?";
}

// A system prompt of about `tokens` tokens: English text runs near 4 bytes
// a token in the Llama vocabularies (the first turn's prompt_tokens, in the
// report, says what it was).
std::string system_prompt(std::size_t tokens) {
  std::string s = "You are the assistant of a small bookshop by the sea.";
  for (int i = 0; s.size() < tokens * 4; ++i) {
    s += " Rule " + std::to_string(i) + ": answer briefly, kindly and in plain words, and name the shelf.";
  }
  return s;
}

Result<json::object> run_mode(Mode mode, const SharedPromptOptions& o, const std::string& system,
                              std::vector<std::string>& texts) {
  auto weights = model::load_model(o.model_path);
  if (!weights) return weights.error();
  actors::EngineOptions eo;
  eo.n_threads = o.threads;
  eo.scheduler.keep_kv = mode != Mode::no_state;
  eo.scheduler.max_batch_tokens = o.batch_tokens;
  eo.scheduler.share_running_prefixes = o.share_running_prefixes;
  eo.kv_cache_mb = o.kv_mb;
  asio::io_context io;  // outlives the engine, which completes operations on it
  auto engine = actors::Engine::create(std::move(*weights), eo);
  if (!engine) return engine.error();
  auto tenant = [&](std::size_t i) { return mode == Mode::separate ? "tenant-" + std::to_string(i) : std::string("t"); };
  auto start = [&](std::size_t i) {
    return asio::co_spawn(io, one_turn(**engine, tenant(i), "conv-" + std::to_string(i), system, question(i),
                                       o.max_tokens),
                          asio::use_future);
  };
  std::vector<Sample> samples(o.conversations);
  const auto t0 = Clock::now();
  if (!o.cold) {
    auto f = start(0);
    io.run();
    samples[0] = f.get();
  }
  // The rest, `in_flight` at a time: each finished one starts the next.
  std::size_t next = o.cold ? 0 : 1;
  std::vector<std::pair<std::size_t, std::future<Sample>>> running;
  while (next < o.conversations || !running.empty()) {
    while (next < o.conversations && running.size() < std::max<std::size_t>(1, o.in_flight)) {
      running.emplace_back(next, start(next));
      ++next;
    }
    io.restart();
    io.run_one();
    for (auto it = running.begin(); it != running.end();) {
      if (it->second.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        samples[it->first] = it->second.get();
        it = running.erase(it);
      } else {
        ++it;
      }
    }
  }
  const double makespan = seconds(Clock::now() - t0);
  io.restart();
  auto stats_future = asio::co_spawn(io, (*engine)->stats(), asio::use_future);
  io.run();
  const actors::SchedulerStats stats = stats_future.get();

  std::vector<double> ttft;
  std::int64_t sent = 0, cached = 0, output = 0;
  std::size_t failed = 0;
  texts.clear();
  for (const Sample& s : samples) {
    texts.push_back(s.text);
    if (!s.error.empty()) {
      ++failed;
      continue;
    }
    ttft.push_back(s.ttft_s);
    sent += s.prompt_tokens;
    cached += s.cached_tokens;
    output += s.completion_tokens;
  }
  json::object r;
  r["conversations"] = o.conversations;
  r["failed"] = failed;
  r["system_prompt_tokens_first_turn"] = samples[0].prompt_tokens;
  r["prompt_tokens_sent"] = sent;
  r["prompt_tokens_computed"] = stats.prefill_tokens;
  r["cached_tokens_reported"] = cached;
  r["hit_ratio"] = sent > 0 ? double(cached) / double(sent) : 0.0;
  r["output_tokens"] = output;
  r["makespan_s"] = makespan;
  r["output_tokens_per_s"] = makespan > 0 ? double(output) / makespan : 0.0;
  r["prompt_tokens_per_s"] = makespan > 0 ? double(sent) / makespan : 0.0;
  r["ttft_p50_s"] = percentile(ttft, 0.5);
  r["ttft_p99_s"] = percentile(ttft, 0.99);
  r["shared_device_blocks_end"] = stats.tiers.shared_device_blocks;
  r["free_blocks_end"] = stats.free_blocks;
  r["num_blocks"] = stats.num_blocks;
  if (failed > 0) r["first_error"] = std::find_if(samples.begin(), samples.end(), [](const Sample& s) {
                                       return !s.error.empty();
                                     })->error;
  return r;
}

}  // namespace

Result<json::object> run_shared_prompt(const SharedPromptOptions& o) {
  if (o.conversations == 0) return fail("--conversations must be at least 1");
  const std::string system = system_prompt(o.system_tokens);
  json::object report;
  report["system_prompt_target_tokens"] = o.system_tokens;
  report["cold"] = o.cold;
  report["share_running_prefixes"] = o.share_running_prefixes;
  report["in_flight"] = o.in_flight;
  json::object modes;
  std::vector<std::vector<std::string>> texts;
  const std::pair<Mode, const char*> order[3] = {
      {Mode::shared, "shared"}, {Mode::separate, "separate"}, {Mode::no_state, "no-state"}};
  for (const std::string& name : o.modes) {
    if (std::none_of(std::begin(order), std::end(order), [&](const auto& m) { return name == m.second; })) {
      return fail("unknown shared-prompt mode \"" + name + "\" (shared, separate, no-state)");
    }
  }
  for (const auto& [mode, name] : order) {
    if (std::find(o.modes.begin(), o.modes.end(), name) == o.modes.end()) continue;
    std::fprintf(stderr, "engine-bench: shared system prompt, mode %s\n", name);
    auto r = run_mode(mode, o, system, texts.emplace_back());
    if (!r) return r.error();
    modes[name] = std::move(*r);
  }
  if (texts.empty()) return fail("no shared-prompt mode to run");
  report["identical_greedy_tokens"] =
      std::all_of(texts.begin(), texts.end(), [&](const auto& t) { return t == texts.front(); });
  if (!modes.contains("shared") || !modes.contains("separate")) {
    report["modes"] = std::move(modes);
    return report;
  }
  auto num = [&](const char* mode, const char* key) { return modes.at(mode).as_object().at(key).to_number<double>(); };
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  report["computed_separate_over_shared"] =
      ratio(num("separate", "prompt_tokens_computed"), num("shared", "prompt_tokens_computed"));
  report["throughput_shared_over_separate"] =
      ratio(num("shared", "output_tokens_per_s"), num("separate", "output_tokens_per_s"));
  report["ttft_p50_separate_over_shared"] = ratio(num("separate", "ttft_p50_s"), num("shared", "ttft_p50_s"));
  report["modes"] = std::move(modes);
  return report;
}

}  // namespace pensieve::bench
