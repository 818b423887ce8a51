#pragma once
// Fits a device model's compute constants (effective FLOP rate, effective
// memory bandwidth, per-iteration overhead, and how far compute and memory
// traffic overlap: one of 1, 0.75, 0.5, 0.25, 0) to iterations timed
// on a real engine, so that iteration_cost.hpp's roofline reproduces them;
// and writes the fitted model as a device file. The fit minimises the
// squared log ratio of modelled to measured time over every sample (each
// sample weighs the same whatever its length) by a coarse log grid and a
// pattern search from its best point: the roofline's max() has no closed
// form, and three parameters make the search cheap. Pure.
#include "bench/pensieve-sim/device_model.hpp"
#include "bench/pensieve-sim/iteration_cost.hpp"
#include "bench/pensieve-sim/model_shape.hpp"

#include <span>
#include <string>
#include <vector>

namespace pensieve::sim {

struct TimedIteration {
  std::string what;  // "prefill 512", "decode x4": for the report
  std::vector<BatchRow> rows;
  double seconds = 0;
};

struct DeviceFit {
  DeviceModel device;          // the base with the fitted constants (efficiencies 1)
  double rms_log_error = 0;    // over the samples, natural log of modelled / measured
  double max_relative_error = 0;
  std::vector<double> modelled_s;  // per sample, with the fitted constants
};

// `base` gives every figure the fit does not touch (memory, tiers).
// overhead_us >= 0: the overhead is that, and only the two rates are fitted.
Result<DeviceFit> fit_device(const DeviceModel& base, const ModelShape& model, std::span<const TimedIteration> samples,
                             double overhead_us = -1);

// A device file parse_device_model reads back to the same figures.
std::string render_device_json(const DeviceModel& device, const std::string& notes);

}  // namespace pensieve::sim
