#pragma once
// The decode plan's thresholds as measured on a device: a JSON file that
// tests/gpu/device-checks.sh writes from its attention benchmarks (which
// fixed plan won at which batch shape) and the server loads with
// --decode-plan FILE, instead of the provisional defaults of
// DecodePlanThresholds. Every key is optional (a missing one keeps its
// default); an unknown key, a wrong type or a value out of range is an error
// naming it, so a stale or hand-edited table never loads half-understood.
//
//   {"device": "NVIDIA H200", "min_items_per_worker": 2.0,
//    "split_min_context_tokens": 1024, "packed_imbalance_ratio": 4.0,
//    "target_items_per_worker": 4.0}
#include "gpu/kernels/decode_plan.hpp"
#include "runtime/error.hpp"

#include <string>
#include <string_view>

namespace pensieve::kernels {

struct DecodePlanTable {
  DecodePlanThresholds thresholds;
  std::string device;  // what the table was measured on ("" when not said)
};

Result<DecodePlanTable> parse_decode_plan_table(std::string_view json);
Result<DecodePlanTable> load_decode_plan_table(const std::string& path);

// One line for the log and /metrics' info: the constants in use.
std::string describe(const DecodePlanThresholds& t);

}  // namespace pensieve::kernels
