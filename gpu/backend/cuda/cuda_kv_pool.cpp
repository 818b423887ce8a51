#include "gpu/backend/cuda/cuda_kv_pool.hpp"

#include "gpu/backend/cuda/cuda_check.hpp"

#include <string>

namespace pensieve::backend::cuda {
namespace {

bool same_layout(const kv::KvPoolConfig& a, const kv::KvPoolConfig& b) {
  return a.num_blocks == b.num_blocks && a.block_tokens == b.block_tokens &&
         a.n_layers == b.n_layers && a.n_kv_heads == b.n_kv_heads && a.head_dim == b.head_dim &&
         a.dtype == b.dtype;
}

}  // namespace

Result<CudaKvPool> CudaKvPool::create(const kv::KvPoolConfig& config) {
  if (config.num_blocks <= 0 || config.block_tokens <= 0 || config.n_layers <= 0 ||
      config.n_kv_heads <= 0 || config.head_dim <= 0) {
    return fail("cuda kv pool: every size must be positive");
  }
  CudaKvPool pool;
  pool.config_ = config;
  const MemoryKind kind = config.tier == kv::Tier::device ? MemoryKind::device : MemoryKind::pinned_host;
  auto memory = MemoryBuffer::create(pool.layer_bytes() * std::size_t(config.n_layers), kind);
  if (!memory) return fail("cuda kv pool: " + memory.error().message);
  pool.memory_ = std::move(*memory);
  return pool;
}

std::size_t CudaKvPool::block_bytes_per_layer() const {
  return std::size_t(2) * std::size_t(config_.block_tokens) *
         kv::kv_values_bytes(config_.dtype, std::int64_t(config_.n_kv_heads) * config_.head_dim);
}

std::size_t CudaKvPool::layer_bytes() const {
  return block_bytes_per_layer() * std::size_t(config_.num_blocks);
}

kv::PagedKvView CudaKvPool::layer(std::int32_t l) const {
  kv::PagedKvView v;
  v.data = static_cast<std::byte*>(memory_.data()) + layer_bytes() * std::size_t(l);
  v.dtype = config_.dtype;
  v.num_blocks = config_.num_blocks;
  v.block_tokens = config_.block_tokens;
  v.n_kv_heads = config_.n_kv_heads;
  v.head_dim = config_.head_dim;
  return v;
}

Result<void> CudaKvPool::upload(const kv::KvPool& host) {
  if (!same_layout(config_, host.config())) return fail("cuda kv pool upload: layouts differ");
  for (std::int32_t l = 0; l < config_.n_layers; ++l) {
    PENSIEVE_CUDA_TRY(cudaMemcpy(layer(l).data, host.layer(l).data, layer_bytes(), cudaMemcpyDefault));
  }
  return {};
}

Result<void> CudaKvPool::download(kv::KvPool& host) const {
  if (!same_layout(config_, host.config())) return fail("cuda kv pool download: layouts differ");
  for (std::int32_t l = 0; l < config_.n_layers; ++l) {
    PENSIEVE_CUDA_TRY(cudaMemcpy(host.layer(l).data, layer(l).data, layer_bytes(), cudaMemcpyDefault));
  }
  return {};
}

Result<void> copy_blocks_async(const CudaKvPool& from, const CudaKvPool& to,
                               std::span<const BlockCopy> copies, cudaStream_t stream) {
  const kv::KvPoolConfig& c = from.config();
  if (c.block_tokens != to.config().block_tokens || c.n_layers != to.config().n_layers ||
      c.n_kv_heads != to.config().n_kv_heads || c.head_dim != to.config().head_dim ||
      c.dtype != to.config().dtype) {
    return fail("copy_blocks_async: the pools' layouts differ");
  }
  const std::size_t block = from.block_bytes_per_layer();
  for (const BlockCopy& copy : copies) {
    if (copy.src.value >= std::uint32_t(c.num_blocks) ||
        copy.dst.value >= std::uint32_t(to.config().num_blocks)) {
      return fail("copy_blocks_async: block id out of range");
    }
  }
  for (std::int32_t l = 0; l < c.n_layers; ++l) {
    const auto* src = static_cast<const std::byte*>(from.layer(l).data);
    auto* dst = static_cast<std::byte*>(to.layer(l).data);
    for (const BlockCopy& copy : copies) {
      PENSIEVE_CUDA_TRY(cudaMemcpyAsync(dst + block * copy.dst.value, src + block * copy.src.value,
                                        block, cudaMemcpyDefault, stream));
    }
  }
  return {};
}

}  // namespace pensieve::backend::cuda
