#pragma once
// CudaKvPool: the KV block pool of one tier in CUDA-visible memory, in the
// layout of kv::KvPool ([num_blocks][2][block_tokens][n_kv_heads][head_dim]
// per layer, one allocation for all layers): device memory for the device
// tier, pinned host memory (cudaHostAlloc) for the host tier, so that block
// copies between them run asynchronously on a copy stream. Block ids come from
// a BlockAllocator kept beside it, as for kv::KvPool. Owned by the worker that
// drives the device; its copies are ordered by the stream they are issued on.
#include "gpu/backend/cuda/device_memory.hpp"
#include "gpu/kv/block_id.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "runtime/error.hpp"

#include <cuda_runtime_api.h>

#include <span>

namespace pensieve::backend::cuda {

class CudaKvPool {
 public:
  // config.tier picks the memory: device -> device memory, host -> pinned host.
  static Result<CudaKvPool> create(const kv::KvPoolConfig& config);

  const kv::KvPoolConfig& config() const { return config_; }
  kv::PagedKvView layer(std::int32_t layer) const;
  std::size_t layer_bytes() const;
  std::size_t block_bytes_per_layer() const;
  std::size_t total_bytes() const { return memory_.bytes(); }
  MemoryKind kind() const { return memory_.kind(); }

  // Whole-pool copies from / to a host KvPool of the same layout (tests,
  // loading a saved cache); synchronous.
  Result<void> upload(const kv::KvPool& host);
  Result<void> download(kv::KvPool& host) const;

 private:
  kv::KvPoolConfig config_;
  MemoryBuffer memory_;
};

// One block moved between tiers: every layer's K and V of `src` into `dst`.
struct BlockCopy {
  kv::BlockId src;
  kv::BlockId dst;
};

// Enqueues the copies on `stream` (a dedicated copy stream, so the compute
// stream keeps running); the pools must have the same layout. Asynchronous:
// record an event on the stream to know when the blocks have landed.
Result<void> copy_blocks_async(const CudaKvPool& from, const CudaKvPool& to,
                               std::span<const BlockCopy> copies, cudaStream_t stream);

}  // namespace pensieve::backend::cuda
