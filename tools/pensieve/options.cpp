#include "tools/pensieve/options.hpp"

#include "gpu/kv/kv_pool.hpp"
#include "runtime/thread_priority.hpp"

#include <charconv>
#include <functional>
#include <map>

namespace pensieve::server {

std::string usage() {
  return R"(usage: pensieve [options]

Serves a Llama-family model over an OpenAI-compatible HTTP API, keeping each
conversation's KV cache between turns.

  --model FILE           GGUF file, Hugging Face directory or llama2.c .bin
                         (default: a built-in generated test model with random weights)
  --host ADDR            address to listen on (default 127.0.0.1)
  --port N               HTTP port (default 8080)
  --rpc-port N           Cap'n Proto RPC port (default 8081)
  --no-state             stateless baseline: drop every conversation's KV after its turn
  --api-key KEY          require "Authorization: Bearer KEY"
  --api-keys FILE        one "KEY TENANT" pair per line
  --kv-device-mb N       KV cache budget on the compute device (default 512)
  --kv-host-mb N         KV cache budget in host memory; 0: no host tier (default:
                         min(4096, a quarter of RAM) on one rank, none with --tp > 1; with
                         --backend cuda it is pinned memory, allocated at start-up; on the
                         CPU backend it is touched only as KV lands in it)
  --kv-disk-dir DIR      folder for the disk KV tier (with --kv-disk-gb)
  --kv-disk-gb N         disk KV tier budget (default 0: no disk tier; needs the host tier, so
                         --backend cpu, --tp 1 and --kv-host-mb > 0)
  --kv-disk-restore M    KV found only on the disk tier (a previous run's, or spilled): auto (read
                         it unless the measured disk read is slower than recomputing it, default),
                         always (read it) or never (recompute it)
  --kv-flush-on-exit-s N at SIGINT/SIGTERM, write the idle conversations' KV that is only on the
                         device or host to the disk tier for up to N seconds, most recently active
                         conversations first, each from its first chunk, so a restart reads it
                         back (default 5; 0: off)
  --kv-dtype T           KV cache dtype: f16 (default, as llama.cpp), bf16, f32, q8_0 (an F16
                         scale per 64 int8 values: 1.94x the tokens of f16) or fp8 (E4M3
                         codes with an F32 scale per 32 values: 1.78x); both backends
  --eviction-policy P    which cached KV chunks leave a tier first: cost (recompute cost over
                         idle time, default) or lru
  --cost-model M         the recompute costs cost eviction weighs: measure (time prefills of 32,
                         128 and 512 tokens at start-up, about a second; default), default (fixed
                         relative constants), or a profile FILE of the lines
                         "per_token_s X" and "per_token_pair_s Y" (as the start-up log prints)
  --swap-out-watermark F copy idle KV to the host ahead of time while less than this share of
                         device blocks is free (default 0.25)
  --decode-reserve F     share of device blocks kept for running decodes (default 0.10)
  --pin-cap-share F      share of device blocks pinned prefixes may hold (cache_control and
                         POST /admin/prefix-cache/pin); a pin past it is refused (default 0.5)
  --no-gather            one transfer per chunk and layer instead of gathering adjacent chunks
  --swap-gather M        small scattered swap runs under --backend cuda: auto (four or more runs
                         under 512 KiB go through one gather-kernel launch, default) or off (one
                         DMA copy per run); the CPU backend copies either way
  --history-dir DIR      keep every conversation's history in a journal in DIR, fsynced before
                         a turn is acknowledged; a restart on the same DIR brings the
                         conversations back (their KV is recomputed) (default: off); a
                         journal records its model and is refused by another one
  --history-reset-on-model-change
                         a --history-dir journal of another model is moved aside and the
                         server starts without its conversations (logged) instead of refusing
  --context-overflow P   a conversation whose history plus max_tokens passes the context:
                         truncate (drop its oldest whole turns, never the system prompt, and
                         report pensieve.truncated_tokens; default) or error (a 400 with the
                         numbers); stateless requests always get the 400
  --max-batch-tokens N   tokens per scheduler iteration (default 512)
  --max-prefill-tokens N prefill tokens per iteration beside the running decodes; longer
                         prompts are chunked, and turns that arrive together get their first
                         tokens one iteration apart (default: 128 on the CPU backend, where an
                         iteration's time is its prefill tokens; 0: up to --max-batch-tokens,
                         the cuda default)
  --request-timeout-s N  cancel a turn still running after N seconds: HTTP 504, a WebSocket
                         timeout error frame, an RPC exception (default 600)
  --max-turns-per-tenant N
                         turns one API key (tenant) may have in the engine at once, on every
                         front end; more: HTTP 429 with Retry-After, WebSocket close 1013,
                         RPC OVERLOADED (default: no limit)
  --max-conversations N  stored conversations in memory at once; past it the least recently used
                         idle one leaves memory: its KV is freed and, with --history-dir, its
                         history unloaded to the journal (reloaded on its next turn), otherwise
                         it is deleted (a later request for it: 404) (default: no limit)
  --conversation-idle-s S
                         an idle conversation leaves memory, as above, after S seconds without
                         a turn; one with a turn running never does (default: never)
  --max-conversations-per-tenant N
                         stored conversations one API key may have; creating one more is
                         refused with 429 until one is deleted (default: no limit)
  --threads N            compute threads (default: all cores)
  --compute-nice N|idle  nice value 0..19 of the compute threads (the forward pass), so that
                         token delivery (HTTP I/O, the scheduler) preempts compute on busy cores;
                         idle: the SCHED_IDLE class, preempted at once by any other thread (for a
                         machine that serves only this; other work starves the pass); 0 leaves
                         them as they are (default 0)
  --backend B            compute backend: cpu (default) or cuda (needs a CUDA build and a device;
                         without one the server exits with an error)
  --tp N                 tensor parallelism over N ranks, each with its shard of the weights and
                         its share of the KV heads (N must divide the heads, KV heads and ff_dim;
                         threads on the CPU backend, one GPU per rank over NCCL with --backend
                         cuda; not with --kv-host-mb yet) (default 1)
  --decode-plan FILE     decode attention plan thresholds measured on the device (the JSON
                         tests/gpu/device-checks.sh writes) instead of the built-in defaults
  --chat-template NAME|FILE
                         the chat template: a built-in (llama2, llama3, chatml, zephyr,
                         mistral) or a Jinja file (a path, or a name ending .jinja)
                         (default: the model's own, rendered as written)
  --trace FILE           record actor and stream spans to FILE (appended while the server runs)
  --trace-flush-ms N     how often --trace drains the span rings into FILE (default 1000; a
                         thread recording more than 32768 spans in one interval loses the rest,
                         counted in the file's header)
  --admin-key KEY        enable POST /admin/trace?seconds=N (1..60; "Authorization: Bearer KEY"),
                         which records the engine's spans for N seconds and answers Chrome
                         trace-event JSON; without this flag /admin routes answer 404
  --shutdown-grace-s N   on SIGINT/SIGTERM: stop accepting, give in-flight HTTP requests,
                         WebSocket chats and RPC turns up to N seconds to finish (a WebSocket
                         then closes with 1001), then cancel them, and exit 0 (default 10)
  --http-threads N       HTTP and WebSocket I/O threads, each serving its share of the
                         connections (default: min(cores, 4))
  --help                 this text
)";
}

namespace {

template <class Int>
Result<void> parse_int(const std::string& flag, const std::string& text, Int& out, std::int64_t lo,
                       std::int64_t hi) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return fail(flag + ": '" + text + "' is not an integer");
  }
  if (v < lo || v > hi) {
    return fail(flag + ": " + text + " is out of range [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
  }
  out = Int(v);
  return {};
}

Result<void> parse_share(const std::string& flag, const std::string& text, double& out) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !(v >= 0.0 && v <= 1.0)) {
    return fail(flag + ": '" + text + "' is not a number in [0, 1]");
  }
  out = v;
  return {};
}

using Setter = std::function<Result<void>(Options&, const std::string&)>;

std::map<std::string, Setter> value_flags() {
  auto text = [](std::optional<std::string> Options::*field) {
    return Setter([field](Options& o, const std::string& v) -> Result<void> {
      o.*field = v;
      return {};
    });
  };
  return {
      {"--model", text(&Options::model)},
      {"--host", [](Options& o, const std::string& v) -> Result<void> { o.host = v; return {}; }},
      {"--port", [](Options& o, const std::string& v) { return parse_int("--port", v, o.port, 0, 65535); }},
      {"--rpc-port", [](Options& o, const std::string& v) { return parse_int("--rpc-port", v, o.rpc_port, 0, 65535); }},
      {"--api-key", text(&Options::api_key)},
      {"--api-keys", text(&Options::api_keys_file)},
      {"--kv-device-mb", [](Options& o, const std::string& v) { return parse_int("--kv-device-mb", v, o.kv_device_mb, 1, 1 << 24); }},
      {"--kv-host-mb", [](Options& o, const std::string& v) { return parse_int("--kv-host-mb", v, o.kv_host_mb, 0, 1 << 24); }},
      {"--kv-disk-dir", text(&Options::kv_disk_dir)},
      {"--kv-dtype", [](Options& o, const std::string& v) -> Result<void> {
         const auto t = kv::kv_dtype_from_name(v);
         if (!t) return fail("--kv-dtype: '" + v + "' is not f32, f16, bf16, q8_0 or fp8");
         o.kv_dtype = *t;
         return {};
       }},
      {"--history-dir", text(&Options::history_dir)},
      {"--context-overflow", [](Options& o, const std::string& v) -> Result<void> {
         if (v != "truncate" && v != "error") return fail("--context-overflow: '" + v + "' is not truncate or error");
         o.context_overflow = v == "error" ? actors::ContextOverflow::error : actors::ContextOverflow::truncate;
         return {};
       }},
      {"--eviction-policy", [](Options& o, const std::string& v) -> Result<void> {
         if (v != "lru" && v != "cost") return fail("--eviction-policy: '" + v + "' is not lru or cost");
         o.kv_cache.eviction_policy = v == "lru" ? actors::EvictionPolicyKind::lru : actors::EvictionPolicyKind::cost_aware;
         return {};
       }},
      {"--cost-model", [](Options& o, const std::string& v) -> Result<void> {
         if (v.empty()) return fail("--cost-model: measure, default or a profile file");
         o.cost_model = v;
         return {};
       }},
      {"--swap-out-watermark", [](Options& o, const std::string& v) { return parse_share("--swap-out-watermark", v, o.kv_cache.swap_out_watermark); }},
      {"--pin-cap-share", [](Options& o, const std::string& v) { return parse_share("--pin-cap-share", v, o.kv_cache.pin_cap_share); }},
      {"--decode-reserve", [](Options& o, const std::string& v) { return parse_share("--decode-reserve", v, o.scheduler.decode_reserve); }},
      {"--kv-disk-gb", [](Options& o, const std::string& v) { return parse_int("--kv-disk-gb", v, o.kv_disk_gb, 0, 1 << 20); }},
      {"--kv-disk-restore", [](Options& o, const std::string& v) -> Result<void> {
         const auto mode = actors::disk_restore_mode_from_name(v);
         if (!mode) return fail("--kv-disk-restore: '" + v + "' is not auto, always or never");
         o.kv_cache.disk_restore = *mode;
         return {};
       }},
      {"--kv-flush-on-exit-s", [](Options& o, const std::string& v) {
         return parse_int("--kv-flush-on-exit-s", v, o.kv_flush_on_exit_s, 0, 3600);
       }},
      {"--max-batch-tokens", [](Options& o, const std::string& v) { return parse_int("--max-batch-tokens", v, o.scheduler.max_batch_tokens, 1, 1 << 20); }},
      {"--max-prefill-tokens", [](Options& o, const std::string& v) { return parse_int("--max-prefill-tokens", v, o.scheduler.max_prefill_tokens, 0, 1 << 20); }},
      {"--threads", [](Options& o, const std::string& v) { return parse_int("--threads", v, o.threads, 1, 1024); }},
      {"--compute-nice", [](Options& o, const std::string& v) -> Result<void> {
         if (v == "idle") {
           o.compute_nice = rt::kIdleClass;
           return {};
         }
         return parse_int("--compute-nice", v, o.compute_nice, 0, rt::kMaxNice);
       }},
      {"--decode-plan", [](Options& o, const std::string& v) -> Result<void> {
         o.decode_plan = v;
         return {};
       }},
      {"--backend", [](Options& o, const std::string& v) -> Result<void> {
         if (v != "cpu" && v != "cuda") return fail("--backend: '" + v + "' is not cpu or cuda");
         o.backend = v;
         return {};
       }},
      {"--swap-gather", [](Options& o, const std::string& v) -> Result<void> {
         if (v != "auto" && v != "off") return fail("--swap-gather: '" + v + "' is not auto or off");
         o.swap_gather_kernel = v == "auto";
         return {};
       }},
      {"--tp", [](Options& o, const std::string& v) { return parse_int("--tp", v, o.tp, 1, 64); }},
      {"--request-timeout-s", [](Options& o, const std::string& v) {
         return parse_int("--request-timeout-s", v, o.request_timeout_s, 1, 86400);
       }},
      {"--max-turns-per-tenant", [](Options& o, const std::string& v) {
         return parse_int("--max-turns-per-tenant", v, o.max_turns_per_tenant, 1, 1 << 20);
       }},
      {"--max-conversations", [](Options& o, const std::string& v) {
         return parse_int("--max-conversations", v, o.max_conversations, 1, 1 << 30);
       }},
      {"--conversation-idle-s", [](Options& o, const std::string& v) {
         return parse_int("--conversation-idle-s", v, o.conversation_idle_s, 1, 1 << 30);
       }},
      {"--max-conversations-per-tenant", [](Options& o, const std::string& v) {
         return parse_int("--max-conversations-per-tenant", v, o.max_conversations_per_tenant, 1, 1 << 30);
       }},
      {"--trace", text(&Options::trace_file)},
      {"--trace-flush-ms",
       [](Options& o, const std::string& v) { return parse_int("--trace-flush-ms", v, o.trace_flush_ms, 1, 60000); }},
      {"--admin-key", text(&Options::admin_key)},
      {"--shutdown-grace-s", [](Options& o, const std::string& v) {
         return parse_int("--shutdown-grace-s", v, o.shutdown_grace_s, 0, 3600);
       }},
      {"--http-threads", [](Options& o, const std::string& v) { return parse_int("--http-threads", v, o.http_threads, 1, 64); }},
      {"--chat-template", text(&Options::chat_template)},
  };
}

}  // namespace

Result<Options> parse_options(const std::vector<std::string>& args) {
  Options o;
  const auto flags = value_flags();
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
    if (arg == "--no-state") {
      o.scheduler.keep_kv = false;
      continue;
    }
    if (arg == "--no-gather") {
      o.gather_copies = false;
      continue;
    }
    if (arg == "--history-reset-on-model-change") {
      o.history_reset_on_model_change = true;
      continue;
    }
    auto it = flags.find(arg);
    if (it == flags.end()) return fail("unknown option '" + arg + "' (see --help)");
    if (!inline_value && i + 1 >= args.size()) return fail(arg + " needs a value");
    const std::string value = inline_value ? *inline_value : args[++i];
    if (auto r = it->second(o, value); !r) return r.error();
  }
  if (o.api_key && o.api_keys_file) return fail("--api-key and --api-keys are exclusive");
  if (o.kv_disk_gb > 0 && !o.kv_disk_dir) return fail("--kv-disk-gb needs --kv-disk-dir");
  if (o.admin_key && o.admin_key->empty()) return fail("--admin-key: the key must not be empty");
  // W-clients on 2 vCPUs (bench/results/2026-12-06-clients-scaling-prefill-chunk.md): 8 clients
  // get their first tokens ~3x sooner than with 512-token prefill iterations, at no cost in tok/s.
  constexpr std::int32_t kCpuPrefillTokens = 128;
  if (o.scheduler.max_prefill_tokens < 0) o.scheduler.max_prefill_tokens = o.backend == "cpu" ? kCpuPrefillTokens : 0;
  return o;
}

}  // namespace pensieve::server
