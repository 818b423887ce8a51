#pragma once
// The command line of the `pensieve` server. Every flag is documented in
// usage(); a bad flag or value is a one-line Error. The scheduler's and the
// KV cache's flags land in their own options structs, which main() hands to
// the engine whole.
#include "actors/context_overflow.hpp"
#include "actors/kv_cache_options.hpp"
#include "actors/scheduler_options.hpp"
#include "gpu/kv/paged_kv_view.hpp"
#include "runtime/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pensieve::server {

struct Options {
  std::optional<std::string> model;  // absent: the built-in generated test model
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  std::uint16_t rpc_port = 8081;
  std::optional<std::string> api_key;
  std::optional<std::string> api_keys_file;
  std::int64_t kv_device_mb = 512;
  std::int64_t kv_host_mb = -1;  // -1: automatic (actors::default_kv_host_mb()); 0: no host tier
  std::optional<std::string> kv_disk_dir;
  std::int64_t kv_disk_gb = 0;
  std::int32_t kv_flush_on_exit_s = 5;  // --kv-flush-on-exit-s: idle KV written to the disk tier at exit; 0: off
  kv::KvDType kv_dtype = kv::KvDType::f16;  // --kv-dtype
  // --no-state (keep_kv), --max-batch-tokens, --max-prefill-tokens (-1 until
  // parsed: the backend's default), --decode-reserve.
  actors::SchedulerOptions scheduler{.max_prefill_tokens = -1};
  // --eviction-policy, --swap-out-watermark, --kv-disk-restore.
  actors::KvCacheOptions kv_cache;
  // --cost-model: "measure" (timed prefills at start-up), "default", or a
  // profile file's path.
  std::string cost_model = "measure";
  bool gather_copies = true;             // --no-gather: one transfer per chunk and layer
  bool swap_gather_kernel = true;        // --swap-gather off: one DMA copy per swap run
  std::optional<std::string> history_dir;  // durable conversation history; absent: off
  bool history_reset_on_model_change = false;  // a journal of another model is set aside, not refused
  // What a conversation past the context does (--context-overflow).
  actors::ContextOverflow context_overflow = actors::ContextOverflow::truncate;
  std::int32_t request_timeout_s = 600;
  std::int32_t max_turns_per_tenant = 0;  // turns one API key may have in the engine; 0: no limit
  std::int32_t max_conversations = 0;     // stored conversations in memory; 0: no limit
  std::int32_t conversation_idle_s = 0;   // idle time before one leaves memory; 0: never
  std::int32_t max_conversations_per_tenant = 0;  // stored conversations per API key; 0: no limit
  std::int32_t threads = 0;  // 0: every core
  std::int32_t compute_nice = 0;  // the compute threads' nice value (0..19, 20: SCHED_IDLE); 0: unchanged
  std::string backend = "cpu";  // cpu | cuda
  std::optional<std::string> decode_plan;  // --decode-plan FILE: measured decode plan thresholds
  std::int32_t tp = 1;          // tensor-parallel ranks (must divide the model's heads and KV heads)
  std::optional<std::string> trace_file;
  std::int32_t trace_flush_ms = 1000;  // --trace: how often the rings are appended to the file
  std::optional<std::string> chat_template;
  std::optional<std::string> admin_key;  // enables /admin routes (POST /admin/trace)
  std::int32_t shutdown_grace_s = 10;    // SIGINT/SIGTERM: time in-flight requests get to finish
  std::int32_t http_threads = 0;         // HTTP/WebSocket I/O threads; 0: min(cores, 4)
  bool help = false;
};

std::string usage();

Result<Options> parse_options(const std::vector<std::string>& args);

}  // namespace pensieve::server
