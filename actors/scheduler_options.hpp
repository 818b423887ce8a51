#pragma once
// The scheduler's options: batch shape, admission and the decode reserve
// (what the command line sets, built once in tools/pensieve/main.cpp). The
// KV cache's own options travel beside them (kv_cache_options.hpp).
#include <cstdint>

namespace pensieve::actors {

struct SchedulerOptions {
  std::int32_t max_batch_tokens = 512;  // tokens per iteration, decode and prefill (--max-batch-tokens)
  // Prefill tokens one iteration carries beside its decodes (0: whatever
  // max_batch_tokens leaves). An iteration's time is mostly its prefill
  // tokens, and a new turn waits for the iteration in flight before its own
  // runs: a smaller chunk bounds both, so turns that arrive together get
  // their first tokens one after another instead of all after one long
  // iteration, and the running decodes keep their pace. Longer prompts are
  // chunked over several iterations (--max-prefill-tokens).
  std::int32_t max_prefill_tokens = 0;
  std::int32_t max_running = 64;        // sequences holding KV and running at once
  std::int32_t max_admitted = 256;      // turns waiting or running; beyond: overloaded
  bool keep_kv = true;                  // false: --no-state, every turn recomputes its history
  // With a host tier and something running, a new turn is admitted only if
  // this share of device blocks stays free or reclaimable for decodes
  // (--decode-reserve).
  double decode_reserve = 0.10;
  // A new turn shares the KV a running turn of its namespace has written
  // (SchedulerCore::share_running_prefix); false only to measure without.
  bool share_running_prefixes = true;
};

}  // namespace pensieve::actors
