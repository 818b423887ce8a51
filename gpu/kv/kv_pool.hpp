#pragma once
// KvPool: the KV storage of one tier in host memory: one tensor per layer,
// each [num_blocks][2][block_tokens][n_kv_heads][head_dim] in F32, F16,
// BF16 or Q8_0 (paged_kv_view.hpp). Owns that memory (64-byte aligned); block ids come from a
// BlockAllocator kept beside it. Used on its owner's thread (the worker that
// runs the forward pass); kernels read it through PagedKvView.
#include "gpu/kv/block_id.hpp"
#include "gpu/kv/paged_kv_view.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace pensieve::kv {

enum class Tier : std::uint8_t { device, host, disk };

#ifdef NDEBUG
inline constexpr bool kPoisonFreedBlocksByDefault = false;
#else
inline constexpr bool kPoisonFreedBlocksByDefault = true;
#endif

struct KvPoolConfig {
  std::int32_t num_blocks = 0;
  std::int32_t block_tokens = 32;
  std::int32_t n_layers = 1;
  std::int32_t n_kv_heads = 1;
  std::int32_t head_dim = 0;
  KvDType dtype = KvDType::f32;
  Tier tier = Tier::host;
  // Fill freed blocks with NaN so a read through a stale block table shows.
  bool poison_freed = kPoisonFreedBlocksByDefault;
};

// "f32", "f16", "bf16", "q8_0", "fp8" (kv_dtype_name's names); anything else: none.
std::optional<KvDType> kv_dtype_from_name(std::string_view name);

// Bytes one token takes across all layers, K and V.
std::size_t kv_bytes_per_token(const KvPoolConfig& config);

// Where a pool's layers are allocated. Default: 64-byte aligned host memory.
// The CUDA backend gives its host tier pinned memory (cudaHostAlloc), so
// that copies to and from the device run asynchronously on a copy stream.
// `allocate` returns null when out of memory (the pool throws bad_alloc).
struct KvPoolMemory {
  std::function<void*(std::size_t bytes)> allocate;
  std::function<void(void*)> release;
};

class KvPool {
 public:
  explicit KvPool(const KvPoolConfig& config);
  KvPool(const KvPoolConfig& config, KvPoolMemory memory);

  const KvPoolConfig& config() const { return config_; }
  PagedKvView layer(std::int32_t layer) const;
  std::size_t bytes_per_token() const { return kv_bytes_per_token(config_); }
  std::size_t layer_bytes() const;
  std::size_t total_bytes() const { return layer_bytes() * std::size_t(config_.n_layers); }

  // Copies token slots [0, tokens) of block src into dst, K and V, every layer.
  void copy_prefix(BlockId src, BlockId dst, std::int32_t tokens);
  // Fills the block with NaN in every layer.
  void poison(BlockId id);

 private:
  struct LayerFree {
    std::shared_ptr<const KvPoolMemory> memory;  // null: the default allocation
    void operator()(std::byte* p) const;
  };
  KvPoolConfig config_;
  std::vector<std::unique_ptr<std::byte[], LayerFree>> layers_;
};

}  // namespace pensieve::kv
