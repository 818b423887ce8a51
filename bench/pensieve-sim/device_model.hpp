#pragma once
// A modelled device for pensieve-sim: what one iteration of a batch costs on
// it (a roofline: FLOPs over sustained tensor throughput, bytes over memory
// bandwidth, plus a fixed overhead), how fast KV moves between its tiers
// (host <-> device per direction, and the loss when both run at once; disk),
// and how much memory holds weights and KV. Read from a JSON data file
// (devices/*.json: the presets, each with its sources); every figure is an
// input of a model, not a measurement of this project, unless the file says
// it was calibrated.
#include "runtime/error.hpp"

#include <string>
#include <vector>

namespace pensieve::sim {

struct DeviceModel {
  std::string name;
  std::string file;                  // where it was read from
  std::vector<std::string> sources;  // datasheets, papers, results files
  double memory_gb = 80.0;           // per device
  double memory_utilization = 0.9;   // share for weights, activations and KV (vLLM's default)
  double activation_reserve_gb = 2.0;
  double kv_budget_gb = 0.0;         // > 0: the KV budget per device, instead of what memory leaves
  double tensor_tflops = 312.0;      // dense FP16/BF16 peak per device
  double tensor_efficiency = 0.6;    // sustained share of the peak in a forward pass's GEMMs
  double hbm_gbps = 2039.0;
  double hbm_efficiency = 0.8;       // sustained share of the memory bandwidth (weights, KV)
  double iteration_overhead_us = 40.0;  // launches, sampling, scheduling per iteration
  // A turn's front half before the scheduler sees it (template render,
  // tokenizing, the conversation actor's hop): its arrival reaches the
  // scheduler this much later. A latency, not a device cost: it runs on
  // other threads and adds to every turn's TTFT, not to any iteration.
  double turn_start_us = 0.0;
  // How much of the shorter roofline side hides under the longer: 1, a GPU
  // streaming weights while its tensor cores run (the time is the longer
  // side); 0, a CPU thread that reads, then computes (the sum).
  double compute_memory_overlap = 1.0;
  double pcie_h2d_gbps = 25.0;       // host -> device, pinned, sustained
  double pcie_d2h_gbps = 25.0;
  double pcie_duplex_loss = 0.2;     // share of bandwidth lost while both directions run
  double disk_read_gbps = 3.0;
  double disk_write_gbps = 2.0;
  double interconnect_gbps = 300.0;  // per direction between devices (tensor parallel all-reduce)
  double allreduce_latency_us = 8.0;
};

Result<DeviceModel> parse_device_model(const std::string& json_text, const std::string& source);
// A preset name (a100-80gb, h100, h200, cpu) from the presets folder, or a
// path to a JSON file.
Result<DeviceModel> load_device_model(const std::string& name_or_path);
std::vector<std::string> device_presets();

}  // namespace pensieve::sim
