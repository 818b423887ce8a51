#pragma once
// Start-up calibration of the eviction policy's recompute costs: times a few
// prefills from position 0 on the backend the engine will serve with and
// fits CostModel to them (CostModel::fit), so that a chunk's retention value
// is in the seconds this machine takes to compute it again. Or reads the
// constants from a profile file (what an earlier start-up logged).
//
// calibrate_cost_model() runs once, in Engine::create, on the creating
// thread, before the GPU worker owns the backend: its KV pool is unused
// then, and the passes write blocks that every later turn overwrites
// before it reads them.
#include "actors/eviction_policy.hpp"
#include "gpu/backend/paged_forward.hpp"
#include "runtime/error.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pensieve::actors {

// Where the engine's constants come from (--cost-model).
enum class CostModelSource : std::uint8_t {
  given,     // KvCacheOptions::cost_model as set (the defaults, or a profile file)
  measured,  // timed prefills at start-up
};

struct CostCalibrationOptions {
  // Prefill lengths timed, shortest first; each is cut to what one pass and
  // the pool hold (limit_tokens).
  std::vector<std::int32_t> prefill_tokens = {32, 128, 512};
  std::int32_t limit_tokens = 512;
  // No longer length is started once this much time has gone (the first
  // two always run: a fit needs two lengths).
  std::int64_t budget_ns = 2'000'000'000;
};

// The constants in use and how they were found, for the start-up log,
// /metrics and tests.
struct CostModelReport {
  CostModel model;
  bool measured = false;
  std::vector<PrefillSample> samples;  // empty unless measured
  std::string source;                  // "measured", "default", a profile's path...
};

// Times the prefills (the fastest of two runs each, after one warm-up pass)
// and fits them. A fit the samples cannot determine keeps `fallback`,
// saying so in `source`. Errors: a pass failed.
Result<CostModelReport> calibrate_cost_model(backend::PagedForward& forward, const CostCalibrationOptions& options,
                                             const CostModel& fallback);

// A profile file: "per_token_s <number>" and "per_token_pair_s <number>",
// one a line (what describe() prints). Errors name the file and the line.
Result<CostModel> load_cost_profile(const std::string& path);

// One line for the start-up log: the constants, in a profile's words, and
// where they come from.
std::string describe(const CostModelReport& report);

}  // namespace pensieve::actors
