#include "bench/pensieve-sim/sim_options.hpp"

#include <charconv>
#include <cstdlib>
#include <sstream>

namespace pensieve::sim {

const char* usage() {
  return R"(pensieve-sim: the server's own scheduler, KV cache and eviction policy on a modelled device,
fed a conversation trace; every figure it prints is simulated.

  --device NAME|FILE     a100-80gb (default), h100, h200, cpu, or a device JSON file
  --model NAME|FILE      llama-2-13b (default), opt-13b, llama-2-70b, llama-3-8b, or a .gguf (its shape)
  --data FILE            conversations (JSONL, ../shared/data/*.jsonl); required
  --tp N                 tensor-parallel devices (default 1)
  --rate R | --sweep R1,R2,...
                         offered turns per second (default sweep 0.5,1,2,4)
  --host-gb G | --what-if G1,G2,...
                         host tier size, or a sweep of it (default 128)
  --disk-gb G            a disk tier under the host tier, pensieve policy (default 0)
  --policy P             pensieve, stateless, prefix-lru, offload-lru or all (default all)
  --think-s S            mean think time between a reply and the next turn (default 10)
  --latency-target S     mean normalized latency target, s per output token (default 0.2)
  --ttft-p99-target S    and a TTFT p99 target (default none)
  --conversations N      the first N conversations of --data (default all; more than it holds:
                         its conversations again, as new ones)
  --block-tokens N       tokens per KV block (default 16)
  --max-batch-tokens N   tokens per iteration (default 2048)
  --seed S               arrivals and think times (default 1)
  --out FILE.json        every run as JSON
  --svg FILE.svg         throughput vs mean normalized latency per policy

  --calibrate-cpu MODEL.gguf [--threads N] [--data FILE] [--conversations N] [--replay-think-s S]
                --out devices/cpu-NAME.json
                         time the real CPU engine on MODEL (prefills, decode batches), fit the
                         device constants, replay --data's first conversations through the engine
                         and the simulator (4 conversations, think 0.05 s by default), print both,
                         and write the fitted device file
)";
}

namespace {

Result<double> number(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !(d >= 0)) return fail(flag + ": '" + v + "' is not a non-negative number");
  return d;
}

Result<std::vector<double>> numbers(const std::string& flag, const std::string& v) {
  std::vector<double> out;
  std::stringstream s(v);
  std::string part;
  while (std::getline(s, part, ',')) {
    auto d = number(flag, part);
    if (!d) return d.error();
    out.push_back(*d);
  }
  if (out.empty()) return fail(flag + ": no value");
  return out;
}

template <class Int>
Result<Int> integer(const std::string& flag, const std::string& v, Int lo, Int hi) {
  Int x{};
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi)
    return fail(flag + ": '" + v + "' is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

}  // namespace

Result<CliOptions> parse_cli(const std::vector<std::string>& args) {
  CliOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      o.help = true;
      return o;
    }
    if (i + 1 >= args.size()) return fail(a + ": needs a value (or unknown flag)");
    const std::string& v = args[++i];
    Result<void> ok;
    auto set_number = [&](double& out) -> Result<void> {
      auto d = number(a, v);
      if (!d) return d.error();
      out = *d;
      return {};
    };
    if (a == "--device") {
      o.device = v;
    } else if (a == "--model") {
      o.model = v;
    } else if (a == "--data") {
      o.data = v;
    } else if (a == "--tp") {
      auto n = integer<std::int32_t>(a, v, 1, 64);
      if (!n) return n.error();
      o.tp = *n;
    } else if (a == "--rate" || a == "--sweep") {
      auto r = numbers(a, v);
      if (!r) return r.error();
      o.rates = *r;
    } else if (a == "--host-gb" || a == "--what-if") {
      auto r = numbers(a, v);
      if (!r) return r.error();
      o.host_gbs = *r;
    } else if (a == "--disk-gb") {
      ok = set_number(o.disk_gb);
    } else if (a == "--policy") {
      o.policy = v;
    } else if (a == "--think-s") {
      ok = set_number(o.think_s);
    } else if (a == "--latency-target") {
      ok = set_number(o.latency_target_s);
    } else if (a == "--ttft-p99-target") {
      ok = set_number(o.ttft_p99_target_s);
    } else if (a == "--conversations") {
      auto n = integer<std::size_t>(a, v, 1, std::size_t(1) << 30);
      if (!n) return n.error();
      o.max_conversations = *n;
    } else if (a == "--block-tokens") {
      auto n = integer<std::int32_t>(a, v, 1, 4096);
      if (!n) return n.error();
      o.block_tokens = *n;
    } else if (a == "--max-batch-tokens") {
      auto n = integer<std::int32_t>(a, v, 1, 1 << 20);
      if (!n) return n.error();
      o.max_batch_tokens = *n;
    } else if (a == "--seed") {
      auto n = integer<std::uint64_t>(a, v, 0, ~std::uint64_t{0});
      if (!n) return n.error();
      o.seed = *n;
    } else if (a == "--calibrate-cpu") {
      o.calibrate_model = v;
    } else if (a == "--replay-think-s") {
      ok = set_number(o.replay_think_s);
    } else if (a == "--threads") {
      auto n = integer<std::size_t>(a, v, 1, 1024);
      if (!n) return n.error();
      o.threads = *n;
    } else if (a == "--out") {
      o.out_json = v;
    } else if (a == "--svg") {
      o.out_svg = v;
    } else {
      return fail("unknown flag '" + a + "' (pensieve-sim --help)");
    }
    if (!ok) return ok.error();
  }
  if (o.calibrate_model) {
    if (!o.out_json) return fail("--calibrate-cpu: --out FILE.json (the fitted device) is required");
    if (o.data.empty()) o.data = "../shared/data/oasst.jsonl";
  }
  if (o.data.empty()) return fail("--data FILE is required (pensieve-sim --help)");
  for (double r : o.rates) {
    if (r <= 0) return fail("--rate: a rate must be positive");
  }
  return o;
}

}  // namespace pensieve::sim
