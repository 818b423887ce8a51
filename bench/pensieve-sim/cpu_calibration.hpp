#pragma once
// The CPU preset, calibrated on the machine it runs on: the engine probe
// (engine_probe.hpp) fits the device model's constants (device_fit.hpp),
// then the same conversations are replayed through the real engine (keeping
// their KV, closed loop: conversation i starts at i x stagger, each turn
// after the reply and a seeded think time) and through the simulator with
// the fitted device, given the same schedule and the engine's own token
// counts (each turn's new prompt tokens and reply length, from the replay's
// usage figures, not chars/4). Its report sets the two side by side:
// throughput and time to first token. A loaded machine's speed drifts
// within seconds, so probe and replay alternate for `rounds` rounds: the fit
// takes each probe's median over the rounds, and the measured figures pool
// every round's turns (throughput: every turn over the sum of the rounds'
// makespans), against one simulation of the replay.
#include "bench/engine-bench/replay.hpp"
#include "bench/pensieve-sim/engine_probe.hpp"
#include "bench/pensieve-sim/sim_workload.hpp"
#include "bench/pensieve-sim/simulator.hpp"

#include <string>

namespace pensieve::sim {

struct CalibrationOptions {
  EngineSetup engine;
  ProbeOptions probe;
  std::string data;  // JSONL conversations
  std::size_t conversations = 4, turns = 3, max_bytes = 300;
  bench::ReplayOptions replay{.think_time_s = 0.05, .stagger_s = 0.05, .max_tokens = 16, .seed = 1, .stateless = false};
  std::size_t rounds = 3;
  std::string date;  // YYYY-MM-DD for the device file; empty: today (UTC)
};

struct ReplayFigures {
  std::size_t turns = 0;
  double makespan_s = 0;
  double turns_per_s = 0;
  double output_tokens_per_s = 0;
  double ttft_mean_s = 0;
  double ttft_p50_s = 0;  // nearest rank, on both sides
  std::int64_t prefill_tokens = 0;
  std::int64_t reused_tokens = 0;
};

struct Calibration {
  std::string cpu;
  std::string date;
  std::vector<TimedIteration> samples;  // forward passes (medians over the rounds)
  double overhead_us = 0;               // per iteration, over its forward pass (median over the rounds)
  double prefill_ttft_excess_us = 0;    // a lone prefill's TTFT over its forward pass
  DeviceFit fit;                        // its device's overhead is overhead_us
  Workload workload;  // the replay's token counts and schedule
  ReplayFigures measured, simulated;  // measured: the rounds pooled
  // Turn by turn: measured (the first round's, in its order) and simulated.
  std::vector<bench::TurnSample> measured_turns;
  std::vector<TurnTiming> simulated_turns;
  // The engine's own iterations during the first round's replay (its scheduler's records).
  std::vector<actors::IterationRecord> engine_iterations;
  double first_makespan_s = 0;
  // The first round's forward passes, measured and as the fitted model
  // prices them (each prefill one row after its conversation's cached
  // tokens, each decode row at the replay's mean context): decode-only
  // iterations and those with a prefill apart.
  double decode_only_ms = 0, decode_only_model_ms = 0, with_prefill_ms = 0, with_prefill_model_ms = 0;
  // Each round's forward passes over the fit's pricing of them, less 1: the
  // machine's speed during that replay against its speed in the probes. The
  // simulator is given the probes' speed, so a round that ran at another
  // tells nothing of it (a VM's neighbour, a core's clock: the first round
  // +41% in one ctest run, AMD EPYC Zen 4, 2026-12-07, the TTFT then 26%
  // off; -6% to +13% in nine runs alone).
  std::vector<double> round_drift;
  std::uint64_t simulated_iterations = 0;
  double throughput_error() const;  // simulated / measured - 1
  double ttft_mean_error() const;
  double ttft_p50_error() const;
  double max_drift() const;  // the largest |round_drift|
};

// A calibration whose rounds drifted more than this measured a machine that
// changed speed, not the simulator: calibrate again.
inline constexpr double calibration_drift_limit = 0.25;

Result<Calibration> calibrate_cpu(const CalibrationOptions& options);

// The measured-vs-simulated table.
std::string render_calibration(const Calibration& c);
// The fitted device file, its sources naming the CPU, date, probe and replay.
std::string render_calibrated_device(const Calibration& c, const CalibrationOptions& options);

}  // namespace pensieve::sim
