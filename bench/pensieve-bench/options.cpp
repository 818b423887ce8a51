#include "bench/pensieve-bench/options.hpp"

#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <sstream>

namespace pensieve::bench {

std::string bench_usage() {
  return R"(usage: pensieve-bench --target [LABEL=]URL [--target ...] --data FILE.jsonl --out DIR [options]

Replays multi-turn conversations against OpenAI-compatible servers (streamed
/v1/chat/completions) and reports throughput, TTFT, inter-token latency,
normalized latency and goodput; one JSON file per target and load, plus
latency-vs-rate.svg and ttft-cdf.svg, in DIR.

  --target [MODE:][LABEL=]URL
                         server root or API base, e.g. http://127.0.0.1:8080 or
                         http://host:8000/v1; repeat to compare servers side by side;
                         MODE (stateful or stateless) sets this target's client
  --data FILE            JSONL conversations {"id","turns":[{"role","content"}...]}
  --conversations N      conversations to replay, in file order, repeating the
                         file when N exceeds it (default: every one once)
  --concurrency C[,C...] closed loop: C conversations in flight (default 4); a list sweeps
  --rate R[,R...]        open loop: Poisson arrivals of R conversations/s; a list sweeps
  --think-time-s S       mean exponential pause before each later turn (default 0)
  --max-tokens N         cap on a turn's output length, which is otherwise the
                         dataset reply's chars/4 (default 128)
  --stateless            send the whole history every turn (default)
  --stateful             send only the new message and "conversation": ID
  --seed S               workload seed: arrivals, think times (default 1)
  --duration-s S         start no conversation or turn after S seconds (default: none)
  --slo-ttft-ms MS       goodput SLO on time to first token (default 2000)
  --slo-tpot-ms MS       goodput SLO on time per later output token (default 200)
  --model NAME           model field of requests (default: first of GET /v1/models)
  --request-timeout-s S  give up on one request after S seconds (default 600)
  --out DIR              where the results go (created if needed)
  --help                 this text
)";
}

std::string format_number(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

namespace {

Result<double> parse_double(const std::string& flag, const std::string& text, double lo, double hi) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) {
    return fail(flag + ": '" + text + "' is not a number");
  }
  if (v < lo || v > hi) return fail(flag + ": " + text + " is out of range [" + format_number(lo) + ", " + format_number(hi) + "]");
  return v;
}

template <class Int>
Result<void> parse_int(const std::string& flag, const std::string& text, Int& out, std::int64_t lo, std::int64_t hi) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return fail(flag + ": '" + text + "' is not an integer");
  if (v < lo || v > hi) {
    return fail(flag + ": " + text + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  out = Int(v);
  return {};
}

Result<void> set_double(const std::string& flag, const std::string& text, double& out, double lo, double hi) {
  auto v = parse_double(flag, text, lo, hi);
  if (!v) return v.error();
  out = *v;
  return {};
}

Result<void> parse_rates(const std::string& text, std::vector<double>& out) {
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    auto v = parse_double("--rate", part, 0.0, 1e6);
    if (!v) return v.error();
    if (*v <= 0) return fail("--rate: " + part + " must be greater than 0");
    out.push_back(*v);
  }
  if (out.empty()) return fail("--rate needs at least one rate");
  return {};
}

using Setter = std::function<Result<void>(BenchOptions&, const std::string&)>;

std::map<std::string, Setter> value_flags() {
  return {
      {"--target", [](BenchOptions& o, const std::string& v) -> Result<void> {
         auto t = parse_target(v);
         if (!t) return t.error();
         o.targets.push_back(std::move(*t));
         return {};
       }},
      {"--data", [](BenchOptions& o, const std::string& v) -> Result<void> { o.data_path = v; return {}; }},
      {"--out", [](BenchOptions& o, const std::string& v) -> Result<void> { o.out_dir = v; return {}; }},
      {"--model", [](BenchOptions& o, const std::string& v) -> Result<void> { o.model = v; return {}; }},
      {"--conversations", [](BenchOptions& o, const std::string& v) { return parse_int("--conversations", v, o.conversations, 1, 1 << 24); }},
      {"--concurrency", [](BenchOptions& o, const std::string& v) -> Result<void> {
         std::stringstream in(v);
         std::string item;
         o.concurrency.clear();
         while (std::getline(in, item, ',')) {
           std::size_t c = 0;
           if (auto r = parse_int("--concurrency", item, c, 1, 1 << 16); !r) return r;
           o.concurrency.push_back(c);
         }
         if (o.concurrency.empty()) return fail("--concurrency needs a value");
         return {};
       }},
      {"--rate", [](BenchOptions& o, const std::string& v) { return parse_rates(v, o.rates); }},
      {"--think-time-s", [](BenchOptions& o, const std::string& v) { return set_double("--think-time-s", v, o.think_time_s, 0, 86400); }},
      {"--max-tokens", [](BenchOptions& o, const std::string& v) { return parse_int("--max-tokens", v, o.max_tokens, 1, 1 << 20); }},
      {"--seed", [](BenchOptions& o, const std::string& v) { return parse_int("--seed", v, o.seed, 0, INT64_MAX); }},
      {"--duration-s", [](BenchOptions& o, const std::string& v) { return set_double("--duration-s", v, o.duration_s, 0, 1e7); }},
      {"--slo-ttft-ms", [](BenchOptions& o, const std::string& v) { return set_double("--slo-ttft-ms", v, o.slo.ttft_ms, 0, 1e9); }},
      {"--slo-tpot-ms", [](BenchOptions& o, const std::string& v) { return set_double("--slo-tpot-ms", v, o.slo.tpot_ms, 0, 1e9); }},
      {"--request-timeout-s", [](BenchOptions& o, const std::string& v) { return set_double("--request-timeout-s", v, o.request_timeout_s, 0.001, 1e6); }},
  };
}

Result<void> check(BenchOptions& o) {
  if (o.targets.empty()) return fail("--target is required (see --help)");
  if (o.data_path.empty()) return fail("--data is required (see --help)");
  if (o.out_dir.empty()) return fail("--out is required (see --help)");
  if (!o.concurrency.empty() && !o.rates.empty()) return fail("--concurrency and --rate are exclusive");
  if (o.concurrency.empty() && o.rates.empty()) o.concurrency = {4};
  for (std::size_t i = 0; i < o.targets.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (o.targets[i].label == o.targets[j].label) {
        return fail("two targets are labelled '" + o.targets[i].label + "': name them with --target LABEL=URL");
      }
    }
  }
  return {};
}

}  // namespace

Result<BenchOptions> parse_bench_options(const std::vector<std::string>& args) {
  BenchOptions o;
  o.command_line = "pensieve-bench";
  for (const auto& a : args) o.command_line += " " + a;
  const auto flags = value_flags();
  bool mode_set = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    std::optional<std::string> inline_value;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      continue;
    }
    if (arg == "--stateful" || arg == "--stateless") {
      const ClientMode m = arg == "--stateful" ? ClientMode::stateful : ClientMode::stateless;
      if (mode_set && m != o.mode) return fail("--stateful and --stateless are exclusive");
      o.mode = m;
      mode_set = true;
      continue;
    }
    auto it = flags.find(arg);
    if (it == flags.end()) return fail("unknown option '" + arg + "' (see --help)");
    if (!inline_value && i + 1 >= args.size()) return fail(arg + " needs a value");
    const std::string value = inline_value ? *inline_value : args[++i];
    if (auto r = it->second(o, value); !r) return r.error();
  }
  if (o.help) return o;
  if (auto r = check(o); !r) return r.error();
  return o;
}

}  // namespace pensieve::bench
