#pragma once
// The benchmark's output: a text table for people and a JSON document for
// bench/results/ (command line, machine, ceilings, one entry per model).
#include "bench/common/fma_peak.hpp"
#include "bench/common/int8_dot_peak.hpp"
#include "bench/common/machine_info.hpp"
#include "bench/common/memory_bandwidth.hpp"
#include "bench/common/sgemm_rate.hpp"
#include "bench/model-bench/model_run.hpp"

#include <string>
#include <vector>

namespace pensieve::bench {

struct ModelBenchReport {
  std::string command_line;
  std::string commit;
  std::string note;
  MachineInfo machine;
  std::string load_average_start, load_average_end;
  std::size_t threads = 0;
  std::vector<BandwidthResult> bandwidth;  // every measurement of the run, in order
  std::vector<SgemmResult> sgemm;
  FmaPeakResult fma_peak;  // the best of the run's measurements, all threads
  Int8DotPeakResult int8_peak;  // likewise; 0 without AVX-512 VNNI
  std::vector<ModelRunResult> runs;
  ModelRunOptions options;

  // The ceilings the runs are held against: the best measured in the run.
  double bandwidth_gb_per_s() const;
  double sgemm_gflops() const;
};

// The compute lower bound of `flops` for one of run's iterations: the share
// run.integer_matrix_share (of the matrix parameters: the quantised ones) at
// the int8 dot peak, the rest at the FMA peak; all at the FMA peak where
// there is no int8 peak. A mixed iteration's attention FLOPs are split the
// same way, an approximation: they run in F32.
double compute_seconds(const ModelBenchReport& report, const ModelRunResult& run, double flops);

std::string format_table(const ModelBenchReport& report);
std::string format_json(const ModelBenchReport& report);

}  // namespace pensieve::bench
