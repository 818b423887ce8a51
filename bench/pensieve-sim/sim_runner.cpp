#include "bench/pensieve-sim/sim_runner.hpp"

#include "bench/pensieve-sim/cpu_calibration.hpp"

#include <fstream>

namespace pensieve::sim {

Result<SimRun> run_sweep(const CliOptions& o) {
  auto device = load_device_model(o.device);
  if (!device) return device.error();
  auto model = load_model_shape(o.model);
  if (!model) return model.error();
  auto policies = parse_policies(o.policy);
  if (!policies) return policies.error();
  WorkloadOptions wo;
  wo.max_context = model->max_context;
  wo.max_conversations = o.max_conversations;
  auto workload = load_workload(o.data, wo);
  if (!workload) return workload.error();
  SimRun run;
  run.device = device->name;
  run.device_file = device->file;
  run.model = model->name;
  run.data = o.data;
  run.tp = o.tp;
  run.host_gb = o.host_gbs.front();
  run.think_s = o.think_s;
  run.seed = o.seed;
  run.latency_target_s = o.latency_target_s;
  run.ttft_p99_target_s = o.ttft_p99_target_s;
  for (double host_gb : o.host_gbs) {
    for (Policy p : *policies) {
      for (double rate : o.rates) {
        SimOptions so;
        so.policy = p;
        so.rate = rate;
        so.think_s = o.think_s;
        so.tp = o.tp;
        so.host_gb = host_gb;
        so.disk_gb = o.disk_gb;
        so.block_tokens = o.block_tokens;
        so.max_batch_tokens = o.max_batch_tokens;
        so.seed = o.seed;
        auto r = simulate(*workload, *device, *model, so);
        if (!r) return fail(std::string(policy_name(p)) + " at " + std::to_string(rate) + " turns/s: " + r.error().message);
        run.results.push_back(*r);
      }
    }
  }
  return run;
}

namespace {

Result<std::string> run_calibration(const CliOptions& o) {
  CalibrationOptions co;
  co.engine.model_path = *o.calibrate_model;
  co.engine.threads = o.threads;
  co.data = o.data;
  co.replay.seed = o.seed;
  co.replay.think_time_s = o.replay_think_s;
  if (o.max_conversations > 0) co.conversations = o.max_conversations;
  auto c = calibrate_cpu(co);
  if (!c) return c.error();
  std::ofstream f(*o.out_json);
  f << render_calibrated_device(*c, co);
  if (!f) return fail("--out: cannot write '" + *o.out_json + "'");
  return render_calibration(*c) + "wrote " + *o.out_json + "\n";
}

}  // namespace

Result<std::string> run_cli(const CliOptions& o) {
  if (o.calibrate_model) return run_calibration(o);
  auto run = run_sweep(o);
  if (!run) return run.error();
  if (o.out_json) {
    std::ofstream f(*o.out_json);
    f << render_json(*run);
    if (!f) return fail("--out: cannot write '" + *o.out_json + "'");
  }
  if (o.out_svg) {
    std::ofstream f(*o.out_svg);
    f << render_plot(*run);
    if (!f) return fail("--svg: cannot write '" + *o.out_svg + "'");
  }
  std::string table = render_table(*run);
  if (o.host_gbs.size() > 1) {
    table += "\n(--what-if: the table lists every host size in order: " + std::to_string(o.host_gbs.size()) +
             " sizes x policies x rates)\n";
  }
  return table;
}

}  // namespace pensieve::sim
