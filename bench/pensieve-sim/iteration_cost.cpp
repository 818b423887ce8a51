#include "bench/pensieve-sim/iteration_cost.hpp"

#include <algorithm>

namespace pensieve::sim {

IterationCost iteration_cost(const DeviceModel& d, const ModelShape& m, std::int32_t tp,
                             std::span<const BatchRow> rows, double swap_in_bytes) {
  IterationCost c;
  if (rows.empty() && swap_in_bytes <= 0) return c;
  const double ranks = std::max(1, tp);
  double tokens = 0, sampled = 0, attention_flops = 0, kv_bytes = 0;
  for (const BatchRow& r : rows) {
    tokens += double(r.tokens);
    if (r.sample) sampled += 1;
    // Causal attention: new token i sees start + i + 1 keys; QK^T and PV are
    // 2 FLOPs per (query, key, dim) pair each.
    const double pairs = double(r.tokens) * (double(r.start) + (double(r.tokens) + 1.0) / 2.0);
    attention_flops += 4.0 * pairs * double(m.n_heads) * m.head_dim * m.n_layers;
    kv_bytes += double(r.start + r.tokens) * m.kv_bytes_per_token();
  }
  const double head = double(m.vocab) * m.dim;
  const double flops = 2.0 * (m.matrix_params() - head) * tokens + 2.0 * head * sampled + attention_flops;
  const double bytes = rows.empty() ? 0.0 : m.weight_bytes() + kv_bytes;
  c.flops_s = flops / (d.tensor_tflops * 1e12 * d.tensor_efficiency * ranks);
  c.bytes_s = bytes / (d.hbm_gbps * 1e9 * d.hbm_efficiency * ranks);
  c.compute_s = std::max(c.flops_s, c.bytes_s) + (1.0 - d.compute_memory_overlap) * std::min(c.flops_s, c.bytes_s);
  if (ranks > 1 && !rows.empty()) {
    // Two all-reduces per layer of the residual stream (ring: 2 (N-1)/N of it over the link).
    const double payload = tokens * m.dim * 2.0 * 2.0 * (ranks - 1.0) / ranks;
    c.comm_s = 2.0 * m.n_layers * (d.allreduce_latency_us * 1e-6 + payload / (d.interconnect_gbps * 1e9));
  }
  const double work = c.compute_s + c.comm_s;
  if (swap_in_bytes > 0) {
    c.swap_in_s = swap_in_bytes / (d.pcie_h2d_gbps * 1e9);
    // Layer-wise overlap: the pass waits for the first layer's copy, then the
    // longer of the copies and the compute.
    const double first_layer = c.swap_in_s / std::max(1, m.n_layers);
    c.total_s = first_layer + std::max(work, c.swap_in_s - first_layer);
  } else {
    c.total_s = work;
  }
  if (!rows.empty()) c.total_s += d.iteration_overhead_us * 1e-6;
  return c;
}

}  // namespace pensieve::sim
