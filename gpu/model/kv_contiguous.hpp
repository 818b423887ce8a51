#pragma once
// The K and V of one sequence for every layer, each a contiguous F32 array
// [max_tokens][n_kv_heads][head_dim] (the simple cache the CPU forward pass
// uses until the paged pool replaces it). Owns its memory; used by one
// forward call at a time, on the caller's thread (the pass writes it).
#include "gpu/model/model_config.hpp"

#include <cstdint>
#include <vector>

namespace pensieve::model {

class ContiguousKvCache {
 public:
  ContiguousKvCache(const ModelConfig& config, std::int32_t max_tokens);

  std::int32_t max_tokens() const { return max_tokens_; }
  // Positions [0, size_tokens()) hold valid K/V.
  std::int32_t size_tokens() const { return size_tokens_; }
  // Forgets the tokens from position n on (a rewind; n <= size_tokens()).
  void truncate(std::int32_t n);
  // Marks positions [0, n) valid (the forward pass, after writing them).
  void set_size_tokens(std::int32_t n);

  std::int64_t token_stride() const { return kv_dim_; }  // floats per position
  float* k(std::int32_t layer) { return k_[std::size_t(layer)].data(); }
  float* v(std::int32_t layer) { return v_[std::size_t(layer)].data(); }
  const float* k(std::int32_t layer) const { return k_[std::size_t(layer)].data(); }
  const float* v(std::int32_t layer) const { return v_[std::size_t(layer)].data(); }

 private:
  std::int32_t max_tokens_;
  std::int32_t size_tokens_ = 0;
  std::int64_t kv_dim_;
  std::vector<std::vector<float>> k_;
  std::vector<std::vector<float>> v_;
};

}  // namespace pensieve::model
