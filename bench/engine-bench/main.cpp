// engine-bench: stateful serving against the --no-state baseline, side by
// side in one run, through the embedded Engine API on the CPU backend. Real
// multi-turn conversations (../shared/data) are replayed by N concurrent
// users with think time, three ways: through the conversation API, as an
// ordinary OpenAI client resending the whole history (the prefix cache's
// case), and with --no-state; all see the same schedule and the same
// model. Prints a table; --out FILE writes the JSON for bench/results/.
#include "bench/common/machine_info.hpp"
#include "bench/engine-bench/replay.hpp"
#include "bench/engine-bench/restart.hpp"
#include "bench/engine-bench/shared_prompt.hpp"
#include "bench/engine-bench/tiers.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"

#include <boost/json.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pb = pensieve::bench;
namespace pm = pensieve::model;
namespace json = boost::json;
using namespace pensieve;

namespace {

struct Args {
  std::optional<std::string> model;
  std::string model_dir = "/tmp/pensieve-engine-bench";
  std::string vocab_from = "../shared/vocab/ggml-vocab-llama-spm.gguf";
  std::string dtype = "f16";
  std::string data = "../shared/data/sharegpt.jsonl";
  std::size_t conversations = 8, turns = 4, max_bytes = 400;
  std::size_t threads = 2;
  std::int32_t batch_tokens = 512;
  std::int64_t kv_mb = 1024;
  kv::KvDType kv_dtype = kv::KvDType::f16;
  pb::ReplayOptions replay;
  std::optional<std::string> out;
  bool tiers = false;  // the KV-tier comparison instead of stateful vs --no-state
  bool shared_prompt = false;  // the shared-system-prompt comparison instead
  std::vector<std::string> shared_modes = {"shared", "separate", "no-state"};
  bool shared_cold = false;
  bool share_running = true;
  bool restart = false;        // the disk-tier restart comparison instead
  std::size_t system_tokens = 1000, in_flight = 8;
  int repetitions = 2;
  double disk_over_total = 2.0;  // the disk tier's budget / the conversations' total KV (0: no disk tier)
  double swap_out_watermark = 0.25, decode_reserve = 0.10;
  std::string modes = "abcd";
  std::string scratch_dir = "/tmp/pensieve-engine-bench/tiers";
  std::string note;
  std::string command;
};

const char* usage =
    "engine-bench [--model FILE.gguf | --model-dir DIR --vocab-from VOCAB.gguf --dtype f32|f16|q8_0]\n"
    "             [--data FILE.jsonl] [--conversations N] [--turns T] [--max-bytes B] [--max-tokens N]\n"
    "             [--think-time-s S] [--stagger-s S] [--threads N] [--batch-tokens N] [--kv-mb MB]\n"
    "             [--kv-dtype f16|bf16|f32|q8_0]\n"
    "             [--seed S] [--note TEXT] [--out FILE.json]\n"
    "             [--tiers [--repetitions N] [--scratch-dir DIR] [--disk-over-total X]\n"
    "                      [--swap-out-watermark F] [--decode-reserve F] [--modes abcd]]\n"
    "             [--shared-system-prompt [--system-tokens N] [--in-flight N] [--shared-modes LIST]\n"
    "                                     [--shared-cold] [--no-share-running]]\n"
    "             [--restart [--repetitions N] [--scratch-dir DIR]]\n"
    "Without --model, generates the BENCH.md M-100 shape (~100M parameters) into --model-dir.\n"
    "--tiers: cost-aware vs LRU (host + disk tiers) vs device only vs --no-state, the device\n"
    "holding a quarter of the conversations' KV, modes interleaved over N repetitions.\n"
    "--shared-system-prompt: --conversations N conversations opening with one system prompt of\n"
    "about --system-tokens tokens: shared (one tenant) vs separate (a tenant each) vs --no-state\n"
    "(--shared-modes: a comma-separated subset of shared,separate,no-state; --shared-cold: no\n"
    "conversation alone first; --no-share-running: new turns do not share running turns' KV).\n"
    "--restart: a restarted engine's TTFT for each conversation's last turn with its KV read\n"
    "from the disk tier the previous engine left, recomputed, and as the disk-vs-recompute rule picks.\n";

std::optional<Args> parse(int argc, char** argv) {
  Args a;
  for (int i = 0; i < argc; ++i) a.command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    std::optional<std::string> v;
    if (f == "--help" || f == "-h") return std::nullopt;
    if (f == "--tiers") {
      a.tiers = true;
      continue;
    }
    if (f == "--shared-system-prompt") {
      a.shared_prompt = true;
      continue;
    }
    if (f == "--shared-cold") {
      a.shared_cold = true;
      continue;
    }
    if (f == "--no-share-running") {
      a.share_running = false;
      continue;
    }
    if (f == "--restart") {
      a.restart = true;
      continue;
    }
    if (!(v = value())) {
      std::fprintf(stderr, "engine-bench: %s needs a value\n", f.c_str());
      return std::nullopt;
    }
    if (f == "--model") a.model = *v;
    else if (f == "--model-dir") a.model_dir = *v;
    else if (f == "--vocab-from") a.vocab_from = *v;
    else if (f == "--dtype") a.dtype = *v;
    else if (f == "--data") a.data = *v;
    else if (f == "--conversations") a.conversations = std::stoul(*v);
    else if (f == "--turns") a.turns = std::stoul(*v);
    else if (f == "--max-bytes") a.max_bytes = std::stoul(*v);
    else if (f == "--max-tokens") a.replay.max_tokens = std::stoi(*v);
    else if (f == "--think-time-s") a.replay.think_time_s = std::stod(*v);
    else if (f == "--stagger-s") a.replay.stagger_s = std::stod(*v);
    else if (f == "--threads") a.threads = std::stoul(*v);
    else if (f == "--batch-tokens") a.batch_tokens = std::stoi(*v);
    else if (f == "--kv-mb") a.kv_mb = std::stoll(*v);
    else if (f == "--kv-dtype") {
      const auto t = kv::kv_dtype_from_name(*v);
      if (!t) {
        std::fprintf(stderr, "engine-bench: --kv-dtype takes f32, f16, bf16 or q8_0, not \"%s\"\n", v->c_str());
        return std::nullopt;
      }
      a.kv_dtype = *t;
    }
    else if (f == "--seed") a.replay.seed = std::stoull(*v);
    else if (f == "--note") a.note = *v;
    else if (f == "--repetitions") a.repetitions = std::stoi(*v);
    else if (f == "--system-tokens") a.system_tokens = std::stoul(*v);
    else if (f == "--in-flight") a.in_flight = std::stoul(*v);
    else if (f == "--shared-modes") {
      a.shared_modes.clear();
      std::string_view rest = *v;
      while (!rest.empty()) {
        const auto comma = rest.find(',');
        a.shared_modes.emplace_back(rest.substr(0, comma));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
    }
    else if (f == "--scratch-dir") a.scratch_dir = *v;
    else if (f == "--disk-over-total") a.disk_over_total = std::stod(*v);
    else if (f == "--swap-out-watermark") a.swap_out_watermark = std::stod(*v);
    else if (f == "--decode-reserve") a.decode_reserve = std::stod(*v);
    else if (f == "--modes") {
      a.modes = *v;
      if (a.modes.empty() || a.modes.find_first_not_of("abcd") != std::string::npos) {
        std::fprintf(stderr, "engine-bench: --modes takes letters of abcd, not \"%s\"\n", v->c_str());
        return std::nullopt;
      }
    }
    else if (f == "--out") a.out = *v;
    else {
      std::fprintf(stderr, "engine-bench: unknown flag %s\n", f.c_str());
      return std::nullopt;
    }
  }
  return a;
}

std::string cut_utf8(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

Result<std::vector<std::vector<std::string>>> load_conversations(const Args& a) {
  std::ifstream in(a.data);
  if (!in) return fail("cannot read " + a.data);
  std::vector<std::vector<std::string>> out;
  std::size_t line_no = 0;
  for (std::string line; out.size() < a.conversations && std::getline(in, line);) {
    ++line_no;
    boost::system::error_code ec;
    auto v = json::parse(line, ec);
    if (ec || !v.is_object() || !v.as_object().contains("turns")) {
      return fail(a.data + ":" + std::to_string(line_no) + ": not a conversation record");
    }
    std::vector<std::string> turns;
    for (const auto& t : v.as_object().at("turns").as_array()) {
      const auto& m = t.as_object();
      if (m.at("role").as_string() == "user" && turns.size() < a.turns) {
        turns.push_back(cut_utf8(std::string(m.at("content").as_string()), a.max_bytes));
      }
    }
    if (turns.size() >= 2) out.push_back(std::move(turns));
  }
  if (out.size() < a.conversations) return fail(a.data + " has too few multi-turn conversations");
  return out;
}

Result<std::string> generate(const Args& a, const pm::TestModelOptions& o, const std::string& name) {
  std::filesystem::create_directories(a.model_dir);
  const auto path = std::filesystem::path(a.model_dir) / name;
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr, "engine-bench: generating %s\n", path.c_str());
    if (auto r = pm::make_test_model(o, path); !r) return r.error();
  }
  return path.string();
}

// Sizes the tier comparison: same vocabulary as the M-100 shape, one small
// layer (token counts do not depend on the weights).
Result<std::string> calibration_model_path(const Args& a) {
  if (a.model) return *a.model;
  pm::TestModelOptions o;
  o.n_layers = 1;
  o.dim = 64;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ff_dim = 128;
  o.max_context = 4096;
  o.dtype = pm::DType::f32;
  o.seed = 7;
  o.vocab_from = a.vocab_from;
  return generate(a, o, "calibration-f32.gguf");
}

Result<std::string> model_path(const Args& a) {
  if (a.model) return *a.model;
  pm::TestModelOptions o;
  o.n_layers = 12;
  o.dim = 768;
  o.n_heads = 12;
  o.n_kv_heads = 4;
  o.ff_dim = 2048;
  o.max_context = 4096;
  o.seed = 7;
  o.vocab_from = a.vocab_from;
  if (a.dtype == "f32") o.dtype = pm::DType::f32;
  else if (a.dtype == "f16") o.dtype = pm::DType::f16;
  else if (a.dtype == "q8_0") o.dtype = pm::DType::q8_0;
  else return fail("--dtype must be f32, f16 or q8_0");
  return generate(a, o, "M-100-" + a.dtype + ".gguf");
}

// Prints why a step failed; main's exit code 1.
int failed(const Error& e) {
  std::fprintf(stderr, "engine-bench: %s\n", e.message.c_str());
  return 1;
}

bool write_report(const Args& a, const json::object& report) {
  if (!a.out) return true;
  std::ofstream out(*a.out);
  out << json::serialize(report) << "\n";
  if (out) return true;
  std::fprintf(stderr, "engine-bench: cannot write %s\n", a.out->c_str());
  return false;
}

int run_tiers(const Args& a, const std::vector<std::vector<std::string>>& convs, json::object report) {
  pb::TierBenchOptions o;
  auto path = model_path(a);
  auto calibration = calibration_model_path(a);
  if (!path || !calibration) return failed(path ? calibration.error() : path.error());
  o.model_path = *path;
  o.calibration_model_path = *calibration;
  o.scratch_dir = a.scratch_dir;
  o.repetitions = a.repetitions;
  o.disk_over_total = a.disk_over_total;
  o.swap_out_watermark = a.swap_out_watermark;
  o.decode_reserve = a.decode_reserve;
  o.modes = a.modes;
  o.threads = a.threads;
  o.batch_tokens = a.batch_tokens;
  o.kv_dtype = a.kv_dtype;
  auto r = pb::run_tier_comparison(convs, a.replay, o);
  if (!r) return failed(r.error());
  std::printf("%-24s %12s %10s %12s %10s %10s %10s %9s\n", "mode (medians)", "out tok/s", "TTFT p50", "recomputed",
              "hit dev", "hit host", "hit disk", "dec/iter");
  for (const auto& [name, m] : r->at("modes").as_object()) {
    const auto& last = m.at("repetitions").as_array().back();
    std::printf("%-24s %12.2f %9.2fs %12.0f %10lld %10lld %10lld %9.2f\n", std::string(name).c_str(),
                m.at("median_output_tokens_per_s").to_number<double>(), m.at("median_ttft_p50_s").to_number<double>(),
                m.at("median_recomputed_tokens").to_number<double>(),
                static_cast<long long>(m.at("hit_tokens_device").to_number<std::int64_t>()),
                static_cast<long long>(m.at("hit_tokens_host").to_number<std::int64_t>()),
                static_cast<long long>(m.at("hit_tokens_disk").to_number<std::int64_t>()),
                last.at("decode_tokens_per_iteration").to_number<double>());
  }
  std::printf("a/c throughput x%.2f, a/d x%.2f, recomputed a %.0f vs b %.0f, identical greedy tokens: %s\n",
              r->at("throughput_a_over_c").to_number<double>(), r->at("throughput_a_over_d").to_number<double>(),
              r->at("recomputed_a").to_number<double>(), r->at("recomputed_b").to_number<double>(),
              r->at("identical_greedy_tokens").as_bool() ? "yes" : "NO");
  for (auto& [k, v] : *r) report[k] = v;
  report["load_average_end"] = pb::load_average();
  return write_report(a, report) ? 0 : 1;
}

int run_restart(const Args& a, const std::string& model, const std::vector<std::vector<std::string>>& convs,
                json::object report) {
  pb::RestartBenchOptions o;
  o.model_path = model;
  o.scratch_dir = a.scratch_dir;
  o.repetitions = a.repetitions;
  o.threads = a.threads;
  o.batch_tokens = a.batch_tokens;
  o.max_tokens = a.replay.max_tokens;
  auto r = pb::run_restart_comparison(convs, o);
  if (!r) return failed(r.error());
  std::printf("%-10s %12s %12s %12s %14s %16s\n", "mode", "TTFT p50", "cached", "disk hits", "recomputed",
              "read s/chunk");
  for (const auto& [name, m] : r->at("modes").as_object()) {
    const auto& last = m.at("repetitions").as_array().back().as_object();
    std::printf("%-10s %11.3fs %12lld %12lld %14lld %16.6f\n", std::string(name).c_str(),
                m.at("median_ttft_p50_s").to_number<double>(),
                static_cast<long long>(last.at("cached_tokens").to_number<std::int64_t>()),
                static_cast<long long>(last.at("hit_tokens_disk").to_number<std::int64_t>()),
                static_cast<long long>(last.at("restores_recomputed").to_number<std::int64_t>()),
                last.at("disk_read_s_per_chunk").to_number<double>());
  }
  std::printf("identical greedy tokens: %s\n", r->at("identical_greedy_tokens").as_bool() ? "yes" : "NO");
  for (auto& [k, v] : *r) report[k] = v;
  report["load_average_end"] = pb::load_average();
  return write_report(a, report) ? 0 : 1;
}

int run_shared_prompt(const Args& a, const std::string& model, json::object report) {
  pb::SharedPromptOptions o;
  o.model_path = model;
  o.conversations = a.conversations;
  o.system_tokens = a.system_tokens;
  o.in_flight = a.in_flight;
  o.max_tokens = a.replay.max_tokens;
  o.threads = a.threads;
  o.batch_tokens = a.batch_tokens;
  o.kv_mb = a.kv_mb;
  o.modes = a.shared_modes;
  o.cold = a.shared_cold;
  o.share_running_prefixes = a.share_running;
  auto r = pb::run_shared_prompt(o);
  if (!r) return failed(r.error());
  std::printf("%-10s %8s %12s %12s %10s %12s %10s %10s\n", "mode", "convs", "prompt sent", "computed", "cached",
              "out tok/s", "TTFT p50", "TTFT p99");
  for (const auto& [name, m] : r->at("modes").as_object()) {
    const auto& o = m.as_object();
    std::printf("%-10s %8lld %12lld %12lld %10lld %12.2f %9.3fs %9.3fs\n", std::string(name).c_str(),
                static_cast<long long>(o.at("conversations").to_number<std::int64_t>()),
                static_cast<long long>(o.at("prompt_tokens_sent").to_number<std::int64_t>()),
                static_cast<long long>(o.at("prompt_tokens_computed").to_number<std::int64_t>()),
                static_cast<long long>(o.at("cached_tokens_reported").to_number<std::int64_t>()),
                o.at("output_tokens_per_s").to_number<double>(), o.at("ttft_p50_s").to_number<double>(),
                o.at("ttft_p99_s").to_number<double>());
  }
  if (r->contains("computed_separate_over_shared")) {
    std::printf("computed separate / shared x%.2f, throughput shared / separate x%.2f\n",
                r->at("computed_separate_over_shared").to_number<double>(),
                r->at("throughput_shared_over_separate").to_number<double>());
  }
  std::printf("identical greedy tokens across the modes run: %s\n",
              r->at("identical_greedy_tokens").as_bool() ? "yes" : "NO");
  for (auto& [k, v] : *r) report[k] = v;
  report["load_average_end"] = pb::load_average();
  return write_report(a, report) ? 0 : 1;
}

json::object to_json(const pb::ReplaySummary& s, const pb::ReplayResult& r) {
  json::object o;
  o["turns"] = s.turns;
  o["failed"] = s.failed;
  o["makespan_s"] = r.makespan_s;
  o["output_tokens_per_s"] = s.output_tokens_per_s;
  o["turns_per_s"] = s.turns_per_s;
  o["ttft_p50_s"] = s.ttft_p50_s;
  o["ttft_p99_s"] = s.ttft_p99_s;
  o["latency_p50_s"] = s.latency_p50_s;
  o["mean_normalized_latency_s"] = s.mean_normalized_latency_s;
  o["prefill_tokens_computed"] = s.prefill_tokens;
  o["prompt_tokens_reused"] = s.reused_tokens;
  // The hit ratio with its denominator: prompt tokens the turns sent, and
  // those the engine said it had cached (usage.cached_tokens).
  std::int64_t prompt = 0, cached = 0;
  for (const auto& t : r.turns) {
    prompt += t.prompt_tokens;
    cached += t.cached_tokens;
  }
  o["prompt_tokens_sent"] = prompt;
  o["cached_tokens_reported"] = cached;
  o["prefix_cache_queried_tokens"] = r.scheduler.tiers.prefix_queried_tokens;
  o["prefix_cache_matched_tokens"] = r.scheduler.tiers.prefix_matched_tokens;
  o["iterations"] = r.scheduler.iterations;
  o["preemptions"] = r.scheduler.preemptions;
  json::array turns;
  for (const auto& t : r.turns) {
    turns.push_back(json::object{{"conversation", t.conversation}, {"turn", t.turn}, {"ttft_s", t.ttft_s},
                                 {"latency_s", t.latency_s}, {"prompt_tokens", t.prompt_tokens},
                                 {"cached_tokens", t.cached_tokens}, {"completion_tokens", t.completion_tokens},
                                 {"error", t.error}});
  }
  o["per_turn"] = std::move(turns);
  return o;
}

// The fields every mode's report opens with.
json::object report_header(const Args& a, const std::string& model) {
  json::object report;
  report["command"] = a.command;
  report["note"] = a.note;
  report["model"] = model;
  report["cpu"] = pb::machine_info().cpu_model;
  report["load_average_start"] = pb::load_average();
  return report;
}

// One replay of the conversations on a fresh engine: stateful or --no-state,
// the conversation API or (replay.stateless) the whole history resent.
Result<pb::ReplayResult> replay_once(const Args& a, const std::string& model,
                                     const std::vector<std::vector<std::string>>& convs, bool stateful,
                                     const pb::ReplayOptions& replay) {
  boost::asio::io_context io;  // outlives the engine, which completes operations on it
  auto weights = pm::load_model(model);
  if (!weights) return weights.error();
  actors::EngineOptions eo;
  eo.n_threads = a.threads;
  eo.scheduler.keep_kv = stateful;
  eo.scheduler.max_batch_tokens = a.batch_tokens;
  eo.kv_cache_mb = a.kv_mb;
  eo.kv_dtype = a.kv_dtype;
  auto engine = actors::Engine::create(std::move(*weights), eo);
  if (!engine) return engine.error();
  return pb::replay(io, **engine, convs, replay);
}

// The conversation API, an ordinary OpenAI client (the whole history, no
// conversation id: the prefix cache finds its KV), and --no-state.
int run_state_modes(const Args& a, const std::string& model, const std::vector<std::vector<std::string>>& convs,
                    json::object report) {
  std::printf("%-10s %6s %12s %10s %10s %12s %14s %10s\n", "mode", "turns", "out tok/s", "TTFT p50", "TTFT p99",
              "norm lat", "prefill tokens", "reused");
  const char* names[3] = {"stateful", "stateless", "no-state"};
  pb::ReplaySummary results[3];
  for (int mode = 0; mode < 3; ++mode) {
    pb::ReplayOptions replay = a.replay;
    replay.stateless = mode == 1;
    const auto r = replay_once(a, model, convs, mode != 2, replay);
    if (!r) return failed(r.error());
    const auto s = pb::summarize(*r);
    results[mode] = s;
    const char* name = names[mode];
    std::printf("%-10s %6zu %12.2f %9.2fs %9.2fs %11.3fs %14lld %10lld\n", name, s.turns, s.output_tokens_per_s,
                s.ttft_p50_s, s.ttft_p99_s, s.mean_normalized_latency_s, static_cast<long long>(s.prefill_tokens),
                static_cast<long long>(s.reused_tokens));
    if (s.failed) std::fprintf(stderr, "engine-bench: %zu turns failed in %s mode\n", s.failed, name);
    report[name] = to_json(s, *r);
  }
  auto ratio = [](double x, double y) { return y > 0 ? x / y : 0.0; };
  const double throughput_ratio = ratio(results[0].output_tokens_per_s, results[2].output_tokens_per_s);
  const double ttft_ratio = ratio(results[2].ttft_p50_s, results[0].ttft_p50_s);
  std::printf("stateful / no-state: throughput x%.2f, p50 TTFT %.2fx lower\n", throughput_ratio, ttft_ratio);
  report["throughput_ratio"] = throughput_ratio;
  report["ttft_p50_ratio"] = ttft_ratio;
  // Targets of the prefix cache: >= 0.9x the conversation API, >= 2.5x --no-state.
  const double stateless_vs_api = ratio(results[1].output_tokens_per_s, results[0].output_tokens_per_s);
  const double stateless_vs_none = ratio(results[1].output_tokens_per_s, results[2].output_tokens_per_s);
  const double stateless_ttft = ratio(results[1].ttft_p50_s, results[0].ttft_p50_s);
  std::printf("stateless / stateful: throughput x%.2f, p50 TTFT x%.2f; stateless / no-state: throughput x%.2f\n",
              stateless_vs_api, stateless_ttft, stateless_vs_none);
  report["stateless_over_stateful_throughput"] = stateless_vs_api;
  report["stateless_over_stateful_ttft_p50"] = stateless_ttft;
  report["stateless_over_no_state_throughput"] = stateless_vs_none;
  report["load_average_end"] = pb::load_average();
  return write_report(a, report) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto args = parse(argc, argv);
  if (!args) {
    std::fputs(usage, stderr);
    return 2;
  }
  std::vector<std::vector<std::string>> convs;
  if (!args->shared_prompt) {
    auto loaded = load_conversations(*args);
    if (!loaded) return failed(loaded.error());
    convs = std::move(*loaded);
  }
  auto path = model_path(*args);
  if (!path) return failed(path.error());
  json::object report = report_header(*args, *path);
  if (args->shared_prompt) {
    report["max_tokens"] = args->replay.max_tokens;
    return run_shared_prompt(*args, *path, std::move(report));
  }
  report["conversations"] = args->conversations;
  report["think_time_s"] = args->replay.think_time_s;
  report["max_tokens"] = args->replay.max_tokens;
  report["kv_dtype"] = kv::kv_dtype_name(args->kv_dtype);
  if (args->tiers) return run_tiers(*args, convs, std::move(report));
  if (args->restart) return run_restart(*args, *path, convs, std::move(report));
  return run_state_modes(*args, *path, convs, std::move(report));
}
