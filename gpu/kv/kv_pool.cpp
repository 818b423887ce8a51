#include "gpu/kv/kv_pool.hpp"

#include <algorithm>

#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <stdexcept>

namespace pensieve::kv {

const char* kv_dtype_name(KvDType t) {
  switch (t) {
    case KvDType::f32:
      return "f32";
    case KvDType::f16:
      return "f16";
    case KvDType::bf16:
      return "bf16";
    case KvDType::q8_0:
      return "q8_0";
    case KvDType::fp8:
      return "fp8";
  }
  return "?";
}

std::optional<KvDType> kv_dtype_from_name(std::string_view name) {
  for (KvDType t : {KvDType::f32, KvDType::f16, KvDType::bf16, KvDType::q8_0, KvDType::fp8}) {
    if (name == kv_dtype_name(t)) return t;
  }
  return std::nullopt;
}

std::size_t kv_bytes_per_token(const KvPoolConfig& c) {
  return std::size_t(c.n_layers) * 2 * kv_values_bytes(c.dtype, std::int64_t(c.n_kv_heads) * c.head_dim);
}

void KvPool::LayerFree::operator()(std::byte* p) const {
  if (memory) {
    memory->release(p);
  } else {
    ::operator delete[](p, std::align_val_t{64});
  }
}

KvPool::KvPool(const KvPoolConfig& config) : KvPool(config, KvPoolMemory{}) {}

KvPool::KvPool(const KvPoolConfig& config, KvPoolMemory memory) : config_(config) {
  if (config.num_blocks < 0 || config.block_tokens <= 0 || config.n_layers <= 0 ||
      config.n_kv_heads <= 0 || config.head_dim <= 0) {
    throw std::invalid_argument("KvPool: every dimension must be positive");
  }
  if (kv_dtype_is_blocked(config.dtype) && (std::int64_t(config.n_kv_heads) * config.head_dim) % kKvRowGranuleValues != 0) {
    throw std::invalid_argument(std::string("KvPool: ") + kv_dtype_name(config.dtype) +
                                " KV needs rows of a multiple of 32 values");
  }
  if (bool(memory.allocate) != bool(memory.release)) {
    throw std::invalid_argument("KvPool: an allocator needs both allocate and release");
  }
  auto shared = memory.allocate ? std::make_shared<const KvPoolMemory>(std::move(memory)) : nullptr;
  for (std::int32_t l = 0; l < config.n_layers; ++l) {
    std::byte* p = nullptr;
    if (shared) {
      p = static_cast<std::byte*>(shared->allocate(layer_bytes() + 64));
      if (p == nullptr) throw std::bad_alloc();
    } else {
      p = static_cast<std::byte*>(::operator new[](layer_bytes() + 64, std::align_val_t{64}));
    }
    layers_.emplace_back(p, LayerFree{shared});
  }
}

std::size_t KvPool::layer_bytes() const {
  return layer(0).bytes();
}

PagedKvView KvPool::layer(std::int32_t layer) const {
  PagedKvView v;
  v.data = layers_.empty() ? nullptr : layers_.at(static_cast<std::size_t>(layer)).get();
  v.dtype = config_.dtype;
  v.num_blocks = config_.num_blocks;
  v.block_tokens = config_.block_tokens;
  v.n_kv_heads = config_.n_kv_heads;
  v.head_dim = config_.head_dim;
  return v;
}

void KvPool::copy_prefix(BlockId src, BlockId dst, std::int32_t tokens) {
  if (std::int64_t(src.value) >= config_.num_blocks ||
      std::int64_t(dst.value) >= config_.num_blocks || tokens < 0 ||
      tokens > config_.block_tokens) {
    throw std::out_of_range("KvPool::copy_prefix: bad block or token count");
  }
  for (std::int32_t l = 0; l < config_.n_layers; ++l) {
    const PagedKvView v = layer(l);
    auto* base = static_cast<std::byte*>(v.data);
    for (int which = 0; which < 2; ++which) {
      std::memcpy(base + v.row_byte_offset(std::int32_t(dst.value), which, 0),
                  base + v.row_byte_offset(std::int32_t(src.value), which, 0),
                  std::size_t(tokens) * v.token_bytes());
    }
  }
}

void KvPool::poison(BlockId id) {
  if (std::int64_t(id.value) >= config_.num_blocks)
    throw std::out_of_range("KvPool::poison: bad block");
  for (std::int32_t l = 0; l < config_.n_layers; ++l) {
    const PagedKvView v = layer(l);
    const std::int64_t begin = v.offset(std::int32_t(id.value), 0, 0, 0);
    if (kv_dtype_is_blocked(config_.dtype)) {
      // Every block's scale a NaN, so every dequantised value: 0x7e7e is an
      // F16 NaN (q8_0); fp8's F32 scale needs all-ones bytes (0xFF codes are
      // E4M3 NaNs too).
      std::memset(static_cast<std::byte*>(v.data) + v.row_byte_offset(std::int32_t(id.value), 0, 0),
                  config_.dtype == KvDType::q8_0 ? 0x7e : 0xFF, v.block_bytes());
    } else if (config_.dtype == KvDType::f32) {
      float* p = static_cast<float*>(v.data) + begin;
      std::fill(p, p + v.block_stride(), std::numeric_limits<float>::quiet_NaN());
    } else {
      const std::uint16_t nan =
          config_.dtype == KvDType::f16 ? std::uint16_t(0x7e00) : std::uint16_t(0x7fc0);
      std::uint16_t* p = static_cast<std::uint16_t*>(v.data) + begin;
      std::fill(p, p + v.block_stride(), nan);
    }
  }
}

}  // namespace pensieve::kv
