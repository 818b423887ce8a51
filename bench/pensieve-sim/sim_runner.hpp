#pragma once
// pensieve-sim's whole run from its options: loads the device, the model
// shape and the trace, simulates every (policy, rate, host size), writes
// --out and --svg, and returns the table it prints.
#include "bench/pensieve-sim/sim_options.hpp"
#include "bench/pensieve-sim/sim_report.hpp"

namespace pensieve::sim {

Result<SimRun> run_sweep(const CliOptions& options);
Result<std::string> run_cli(const CliOptions& options);

}  // namespace pensieve::sim
