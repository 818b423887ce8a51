#pragma once
// The Llama-family decoder on CUDA: the same batch (model::PagedSequence) and
// KV layout as model::CpuForward::forward_paged, with the KV pool in device
// memory (CudaKvPool, in the compute dtype, Q8_0 or FP8). Weights are F16 or BF16
// (converted on load); the residual stream, norms, RoPE and every matrix
// product's accumulation are F32; products read F16/BF16 activations.
//
// Decode-only batches of the sizes in graph_batch_sizes run as CUDA graphs:
// the first batch of a size runs eagerly (warm-up), the second is captured,
// every later one replays the graph after one copy of the batch's inputs.
// Other batches (prefill, mixed, other sizes, sequences longer than the
// graph's block table) run eagerly. Attention in a graph uses a fixed split
// count per sequence so the launch shape never changes.
//
// Owns its stream (unless given one), cuBLAS handle, device weights,
// activation buffers and graphs. Not thread-safe: one call at a time, from
// the thread that drives the stream.
#include "gpu/backend/cuda/cublas_gemm.hpp"
#include "gpu/backend/cuda/cuda_batch.hpp"
#include "gpu/backend/cuda/cuda_kv_pool.hpp"
#include "gpu/backend/cuda/cuda_weights.hpp"
#include "gpu/backend/layer_gates.hpp"
#include "gpu/kernels/cuda/sampling_launch.hpp"
#include "gpu/model/collective.hpp"
#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/tp_rank.hpp"
#include "runtime/error.hpp"

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace pensieve::backend::cuda {

struct CudaForwardOptions {
  kv::KvDType compute_dtype = kv::KvDType::bf16;  // f16 or bf16
  // The KV pool's dtype: the compute dtype, q8_0 or fp8 (quantised as the K/V
  // rows are written, dequantised in the attention kernel); unset: compute_dtype.
  std::optional<kv::KvDType> kv_dtype;
  std::int32_t max_batch_tokens = 2048;   // activation buffers are sized for this
  std::int32_t max_logit_rows = 256;      // rows of logits one call may ask for
  std::vector<std::int32_t> graph_batch_sizes = {1, 2, 4, 8, 16, 32, 64};  // empty: no graphs
  bool copy_logits_to_host = true;  // false: logits stay on the device for sample()
  cudaStream_t stream = nullptr;    // null: the forward pass creates (and owns) one
  kernels::DecodePlanThresholds decode_thresholds;  // eager passes' decode plans
  // Tensor parallelism: the weights are shard `tp` (model/tp_shard.hpp) and
  // `collective` (NCCL, on `stream`) joins the ranks: an all-reduce of the
  // residual after the O and down products (model/tp_plan.hpp's rule), an
  // all-gather of the logits slices. Set even for one rank (the NCCL path
  // with a no-op reduction). Such passes run eagerly (no graphs).
  model::TpRank tp;
  model::Collective* collective = nullptr;
};

struct CudaForwardStats {
  std::int64_t eager_runs = 0, graph_captures = 0, graph_replays = 0;
};

class CudaForward {
 public:
  static Result<std::unique_ptr<CudaForward>> create(const model::ModelWeights& weights,
                                                     CudaForwardOptions options = {});
  // Random device weights of this shape (benchmarks of large models).
  static Result<std::unique_ptr<CudaForward>> create_random(const model::ModelConfig& config,
                                                            CudaForwardOptions options,
                                                            std::uint64_t seed);
  ~CudaForward();
  CudaForward(const CudaForward&) = delete;
  CudaForward& operator=(const CudaForward&) = delete;

  const model::ModelConfig& config() const { return weights_.config; }
  cudaStream_t stream() const { return stream_; }
  const CudaForwardStats& stats() const { return stats_; }
  // Bytes of weights one decode step reads (every matrix and the output head).
  std::size_t matrix_bytes_per_token() const { return weights_.matrix_bytes_per_token; }

  kv::KvDType kv_dtype() const { return options_.kv_dtype.value_or(weights_.dtype); }
  // The pool layout this model needs on the device (dtype = the KV dtype).
  kv::KvPoolConfig kv_pool_config(std::int32_t num_blocks, std::int32_t block_tokens) const;
  // KV blocks that fit in gpu_memory_fraction of the device once what is in
  // use now (these weights and activations included) is taken off, keeping
  // a reserve for graphs and library workspaces (kv_blocks_for_budget).
  Result<std::int32_t> kv_blocks_for_fraction(double gpu_memory_fraction, std::int32_t block_tokens,
                                              std::size_t reserve_bytes = std::size_t(256) << 20) const;

  // Runs the batch on the stream; returns when the logits are on the host
  // (or, without copy_logits_to_host, when the work is enqueued: rows and
  // positions filled, logits empty). Errors from validation leave the pool
  // unchanged; a device error leaves it undefined.
  Result<model::ForwardOutput> forward_paged(std::span<const model::PagedSequence> batch,
                                             CudaKvPool& pool);

  // The next forward_paged makes the stream wait for layer_ready[l] (CUDA
  // events of the copy-in stream) before layer l writes or reads its KV, and
  // runs eagerly (a captured graph cannot wait on another stream's event).
  void gate_next_pass(std::vector<rt::Event> layer_ready) { gates_.arm(std::move(layer_ready)); }

  // One token per logits row of the last forward_paged, sampled on the device.
  Result<std::vector<std::int32_t>> sample(std::span<const kernels::cuda::DeviceSamplingParams> rows);

 private:
  struct Graph;
  struct Buffers;
  CudaForward(DeviceWeights weights, CudaForwardOptions options);
  Result<void> init();
  Result<void> validate(std::span<const model::PagedSequence> batch, const CudaKvPool& pool) const;
  // Every kernel of one pass, reading the batch inputs at `meta` (device).
  Result<void> enqueue_pass(const BatchLayout& layout, const std::byte* meta, float* partial,
                            const CudaKvPool& pool);
  Result<void> upload_batch(const BatchLayout& layout, std::byte* device_meta);
  Result<void> run_eager(const CudaKvPool& pool);
  Result<bool> run_graph(const CudaKvPool& pool);  // false: not graphable, run eagerly
  Result<void> finish(model::ForwardOutput& out);
  std::int32_t graph_splits(std::int32_t batch_size) const;

  DeviceWeights weights_;
  CudaForwardOptions options_;
  LayerGates gates_;  // the next pass's swap-in events
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  std::int32_t sm_count_ = 1;
  std::unique_ptr<CublasContext> cublas_;
  std::unique_ptr<Buffers> buffers_;
  HostBatch host_batch_;
  std::int32_t last_logit_rows_ = 0;
  std::map<std::int32_t, std::unique_ptr<Graph>> graphs_;  // by batch size
  std::map<std::int32_t, bool> warmed_;                    // sizes run once eagerly
  const void* graph_pool_key_ = nullptr;                   // the pool the graphs write
  CudaForwardStats stats_;
};

}  // namespace pensieve::backend::cuda
