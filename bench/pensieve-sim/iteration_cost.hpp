#pragma once
// The modelled time of one scheduler iteration on a device: a roofline of the
// batch (linear-layer and attention FLOPs over sustained tensor throughput
// against weight and KV bytes over sustained memory bandwidth, whichever is
// longer), a fixed per-iteration overhead, tensor-parallel all-reduces, and
// the iteration's swap-in, which overlaps compute layer by layer (layer l's
// copy under layer l-1's compute), so it adds only where it is longer than
// the compute or for its first layer. Pure.
#include "bench/pensieve-sim/device_model.hpp"
#include "bench/pensieve-sim/model_shape.hpp"

#include <cstdint>
#include <span>

namespace pensieve::sim {

// One sequence's share of an iteration: `tokens` new tokens after `start`
// cached ones.
struct BatchRow {
  std::int64_t start = 0;
  std::int64_t tokens = 0;
  // The chunk ends at the newest token and draws the next one: only then is
  // the output head run (for that last position), as the engine does.
  bool sample = true;
};

struct IterationCost {
  double compute_s = 0;  // the roofline's longer side
  double flops_s = 0;
  double bytes_s = 0;
  double comm_s = 0;
  double swap_in_s = 0;
  double total_s = 0;
};

IterationCost iteration_cost(const DeviceModel& device, const ModelShape& model, std::int32_t tp,
                             std::span<const BatchRow> rows, double swap_in_bytes);

}  // namespace pensieve::sim
