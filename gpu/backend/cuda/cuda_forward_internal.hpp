#pragma once
// Internal to CudaForward: its buffers, and one captured decode graph with
// the device memory its kernels read (the graph bakes in these addresses, so
// they live as long as the graph).
#include "gpu/backend/cuda/cuda_forward.hpp"
#include "gpu/kernels/cuda/sampling_launch.hpp"

#include <cuda_runtime_api.h>

namespace pensieve::backend::cuda {

struct CudaForward::Buffers {
  MemoryArena activations;
  float* x = nullptr;      // [tokens][dim] residual stream
  void* xn = nullptr;      // [max(tokens, logit rows)][dim] normed, compute dtype
  float* qkv = nullptr;    // [tokens][q_dim + 2 kv_dim]
  void* q = nullptr;       // [tokens][q_dim] compute dtype
  void* att = nullptr;     // [tokens][q_dim] compute dtype
  float* gate_up = nullptr;  // [tokens][2 ff_dim]
  void* h = nullptr;       // [tokens][ff_dim] compute dtype
  float* logits = nullptr;  // [logit rows][vocab]
  kernels::cuda::DeviceSamplingParams* sample_params = nullptr;
  std::int32_t* sampled = nullptr;
  MemoryBuffer logits_slice, gathered;   // tensor parallelism: [rows][slice], [ranks][rows][slice]
  MemoryBuffer meta, partial;            // eager batch inputs and attention states (grow)
  MemoryBuffer staging;                  // pinned: batch inputs on their way (grows)
  MemoryBuffer host_logits, host_small;  // pinned
  cudaEvent_t staged = nullptr;          // the last copy out of `staging` is done
};

struct CudaForward::Graph {
  cudaGraphExec_t exec = nullptr;  // null: capture failed; this size runs eagerly
  MemoryBuffer meta, partial;
  BatchLayout layout;
  ~Graph() {
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
  }
};

}  // namespace pensieve::backend::cuda
