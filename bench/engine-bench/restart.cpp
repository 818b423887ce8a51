#include "bench/engine-bench/restart.hpp"

#include "actors/engine.hpp"
#include "bench/common/quantiles.hpp"
#include "gpu/model/model_loader.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>

namespace pensieve::bench {

namespace json = boost::json;
namespace asio = boost::asio;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Mode {
  const char* name;
  actors::DiskRestoreMode restore;
  bool measured_cost;  // the rule needs the cost model in seconds
};

constexpr Mode kModes[] = {
    {"read", actors::DiskRestoreMode::read, false},
    {"recompute", actors::DiskRestoreMode::recompute, false},
    {"rule", actors::DiskRestoreMode::rule, true},
};

struct Turn {
  double ttft_s = 0;
  std::int32_t prompt_tokens = 0, cached_tokens = 0;
  std::string text;
  std::string error;
};

actors::EngineOptions engine_options(const RestartBenchOptions& o, const fs::path& dir, std::int32_t device_blocks,
                                     std::int64_t disk_bytes) {
  actors::EngineOptions e;
  e.n_threads = std::int32_t(o.threads);
  e.scheduler.max_batch_tokens = o.batch_tokens;
  e.kv_block_tokens = o.block_tokens;
  e.kv_cache_mb = 4096;
  e.kv_device_blocks = device_blocks;
  e.kv_host_blocks = device_blocks;  // a turn's restores go through host slots: room for a whole conversation
  e.kv_disk_dir = (dir / "kv").string();
  e.kv_disk_bytes = disk_bytes;
  e.kv_cache.swap_out_watermark = 1.0;  // idle KV leaves the device and the host as soon as it can
  e.history_dir = (dir / "history").string();
  return e;
}

asio::awaitable<Turn> one_turn(actors::Engine& engine, std::string tenant, std::string id, std::string text,
                               std::int32_t max_tokens) {
  Turn turn;
  model::SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  actors::TurnRequest request{.tenant = std::move(tenant), .conversation = id, .create_conversation = false,
                              .messages = {{"user", std::move(text)}}, .sampling = p};
  const auto start = Clock::now();
  bool first = true;
  actors::TurnSink sink = [&](const actors::TurnDelta& d) -> asio::awaitable<bool> {
    if (first) turn.ttft_s = std::chrono::duration<double>(Clock::now() - start).count();
    first = false;
    turn.text += d.text;
    co_return true;
  };
  auto stream = engine.start(co_await asio::this_coro::executor, std::move(request));
  if (!stream) {
    turn.error = stream.error().message;
    co_return turn;
  }
  auto r = co_await actors::drain_turn(std::move(*stream), sink);
  if (!r) {
    turn.error = r.error().message;
  } else {
    turn.prompt_tokens = r->prompt_tokens;
    turn.cached_tokens = r->cached_tokens;
  }
  co_return turn;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return quantile_of_sorted(v, 0.5);
}

template <class T>
T run_on(asio::io_context& io, asio::awaitable<T> task) {
  auto f = asio::co_spawn(io, std::move(task), asio::use_future);
  io.restart();
  io.run();
  return f.get();
}

Result<std::unique_ptr<actors::Engine>> make_engine(const std::string& model_path, const actors::EngineOptions& o) {
  auto weights = model::load_model(model_path);
  if (!weights) return weights.error();
  return actors::Engine::create(std::move(*weights), o);
}

// Every conversation's turns but its last, then the same again as another
// tenant's conversations (no prefix shared), which push the measured
// conversations' KV off the device, through the host, to disk.
Result<void> warm(const RestartBenchOptions& o, const std::vector<std::vector<std::string>>& convs,
                  const actors::EngineOptions& eo) {
  asio::io_context io;
  auto engine = make_engine(o.model_path, eo);
  if (!engine) return engine.error();
  for (const std::string tenant : {"bench", "flush"}) {
    for (std::size_t c = 0; c < convs.size(); ++c) {
      const std::string id = "bench-" + std::to_string(c);
      if (!(*engine)->create_conversation(tenant, id)) return fail("cannot create " + id);
      for (std::size_t t = 0; t + 1 < convs[c].size(); ++t) {
        const Turn turn = run_on(io, one_turn(**engine, tenant, id, convs[c][t], o.max_tokens));
        if (!turn.error.empty()) return fail(id + ": " + turn.error);
      }
    }
  }
  return {};
}

void copy_dir(const fs::path& from, const fs::path& to) {
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
}

Result<json::object> run_mode(const RestartBenchOptions& o, const std::vector<std::vector<std::string>>& convs,
                              actors::EngineOptions eo, const Mode& mode, std::vector<std::string>& texts) {
  eo.kv_cache.disk_restore = mode.restore;
  eo.cost_model_source =
      mode.measured_cost ? actors::CostModelSource::measured : actors::CostModelSource::given;
  asio::io_context io;
  auto engine = make_engine(o.model_path, eo);
  if (!engine) return engine.error();
  json::array turns;
  std::vector<double> ttft;
  std::int64_t cached = 0, prompt = 0;
  texts.clear();
  for (std::size_t c = 0; c < convs.size(); ++c) {
    const Turn t = run_on(io, one_turn(**engine, "bench", "bench-" + std::to_string(c), convs[c].back(), o.max_tokens));
    if (!t.error.empty()) return fail("bench-" + std::to_string(c) + ": " + t.error);
    ttft.push_back(t.ttft_s);
    cached += t.cached_tokens;
    prompt += t.prompt_tokens;
    texts.push_back(t.text);
    turns.push_back(json::object{{"conversation", c}, {"ttft_s", t.ttft_s}, {"prompt_tokens", t.prompt_tokens},
                                 {"cached_tokens", t.cached_tokens}});
  }
  const actors::SchedulerStats s = run_on(io, (*engine)->stats());
  json::object r;
  r["ttft_p50_s"] = median(ttft);
  r["ttft_mean_s"] = std::accumulate(ttft.begin(), ttft.end(), 0.0) / double(std::max<std::size_t>(1, ttft.size()));
  r["prompt_tokens"] = prompt;
  r["cached_tokens"] = cached;
  r["found_disk_paths"] = s.tiers.found_disk_paths;
  r["found_disk_chunks"] = s.tiers.found_disk_chunks;
  r["restore_chunks"] = s.tiers.restore_chunks;
  r["hit_tokens_disk"] = s.tiers.hit_tokens_disk;
  r["restores_recomputed"] = s.tiers.restores_recomputed;
  r["disk_read_s_per_chunk"] = s.tiers.disk_read_s_per_chunk;
  r["cost_per_token_s"] = s.cost_model.per_token;
  r["cost_per_token_pair_s"] = s.cost_model.per_token_pair;
  r["cost_in_seconds"] = mode.measured_cost;
  r["per_turn"] = std::move(turns);
  return r;
}

}  // namespace

Result<json::object> run_restart_comparison(const std::vector<std::vector<std::string>>& convs,
                                            const RestartBenchOptions& o) {
  if (convs.empty() || convs.front().size() < 2) return fail("--restart needs conversations of two turns or more");
  const fs::path root = o.scratch_dir;
  const fs::path pristine = root / "pristine", live = root / "live";
  fs::remove_all(root);
  fs::create_directories(pristine);
  // About the longest conversation's KV on the device (its context with a
  // margin: ~3 bytes a token, a reply and template per turn), so the others
  // push each other out; a disk tier for every conversation's.
  std::size_t longest_tokens = 0;
  for (const auto& c : convs) {
    std::size_t bytes = 0;
    for (const auto& t : c) bytes += t.size();
    longest_tokens = std::max(longest_tokens, bytes / 3 + c.size() * (std::size_t(o.max_tokens) + 32));
  }
  const auto device_blocks = std::int32_t(std::max<std::size_t>(8, longest_tokens / std::size_t(o.block_tokens) + 4));
  const std::int64_t disk_bytes = std::int64_t(512) << 20;
  const actors::EngineOptions eo = engine_options(o, pristine, device_blocks, disk_bytes);
  if (auto w = warm(o, convs, eo); !w) return w.error();
  json::object modes;
  std::vector<std::string> first_texts;
  bool identical = true;
  for (int rep = 0; rep < o.repetitions; ++rep) {
    for (const Mode& m : kModes) {
      copy_dir(pristine, live);
      std::vector<std::string> texts;
      auto r = run_mode(o, convs, engine_options(o, live, device_blocks, disk_bytes), m, texts);
      if (!r) return r.error();
      if (first_texts.empty()) first_texts = texts;
      identical = identical && texts == first_texts;
      auto& mode = modes[m.name];
      if (!mode.is_object()) mode = json::object{{"repetitions", json::array{}}};
      mode.as_object()["repetitions"].as_array().push_back(std::move(*r));
    }
  }
  for (auto& [name, m] : modes) {
    std::vector<double> p50;
    for (const auto& rep : m.at("repetitions").as_array()) p50.push_back(rep.at("ttft_p50_s").to_number<double>());
    m.as_object()["median_ttft_p50_s"] = median(p50);
  }
  fs::remove_all(live);
  json::object report;
  report["device_blocks"] = device_blocks;
  report["block_tokens"] = o.block_tokens;
  report["conversations"] = convs.size();
  report["turns"] = convs.front().size();
  report["max_tokens"] = o.max_tokens;
  report["modes"] = std::move(modes);
  report["identical_greedy_tokens"] = identical;
  return report;
}

}  // namespace pensieve::bench
