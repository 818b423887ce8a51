#pragma once
// Times the real CPU engine (the in-process Engine, driven as engine-bench
// drives it) on iterations of known shape, for device_fit.hpp: a prefill of
// each prompt size (one turn alone) and decode steps at each batch size
// (that many turns started together). The times are the engine's own: its
// scheduler's record of each forward pass (IterationRecord::compute_ms),
// and the wall time between one decode step's end and the next's, whose
// excess over the step's forward pass is the per-iteration overhead
// (planning, hand-offs between threads, delivering tokens: on a loaded
// machine mostly the wait for a core). Prompt sizes are the engine's own
// token counts of a repeated sentence. The probe's requests name no
// conversation and the prefix cache is cleared after each, so no probe
// reuses another's KV. It runs on the engine a replay then uses, so that
// both see the same warm caches and pools.
#include "actors/engine.hpp"
#include "bench/pensieve-sim/device_fit.hpp"
#include "runtime/error.hpp"

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pensieve::sim {

// How the engine under test is set up: the probe and the replay it is
// checked against use the same.
struct EngineSetup {
  std::string model_path;  // a .gguf
  std::size_t threads = 1;
  std::int32_t max_batch_tokens = 512;
  std::int32_t block_tokens = 32;
  std::int64_t kv_cache_mb = 256;
};

struct ProbeOptions {
  std::vector<std::int32_t> prefill_tokens = {48, 160, 400};  // about: the engine's counts are recorded
  std::vector<std::int32_t> decode_batches = {1, 2, 4, 8};
  std::int32_t decode_steps = 24;
  // The decode turns' prompts, about: a chat's decode reads a context of
  // some hundred tokens, and the CPU's paged attention costs more per key
  // than the roofline's FLOPs say, so the probe decodes at such a context.
  std::int32_t decode_prompt_tokens = 120;
  std::int32_t repetitions = 3;
};

// The engine's iteration records with the time each arrived; filled on the
// scheduler's thread.
class IterationLog {
 public:
  struct Entry {
    actors::IterationRecord record;
    std::chrono::steady_clock::time_point at;
  };
  void add(const actors::IterationRecord& r);
  std::vector<Entry> take();  // and forget them

 private:
  std::mutex mutex_;
  std::vector<Entry> entries_;
};

// `log`, when given, must outlive the engine.
Result<std::unique_ptr<actors::Engine>> make_engine(const EngineSetup& setup, bool keep_kv, IterationLog* log);

struct ProbeResult {
  std::vector<TimedIteration> compute;  // forward passes of known shape (medians over repetitions)
  double overhead_us = 0;               // the median decode step's wall time over its forward pass
  double prefill_ttft_excess_us = 0;    // a lone prefill's time to first token over its forward pass (median)
};

// `io` runs the probe's clients and must outlive `engine` (see bench::replay);
// `log` is the one the engine was made with.
Result<ProbeResult> probe_engine(boost::asio::io_context& io, actors::Engine& engine, IterationLog& log,
                                 const EngineSetup& setup, const ProbeOptions& options);

}  // namespace pensieve::sim
