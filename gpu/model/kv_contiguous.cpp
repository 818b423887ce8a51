#include "gpu/model/kv_contiguous.hpp"

#include <cassert>

namespace pensieve::model {

ContiguousKvCache::ContiguousKvCache(const ModelConfig& config, std::int32_t max_tokens)
    : max_tokens_(max_tokens), kv_dim_(config.kv_dim()) {
  assert(max_tokens >= 0);
  const auto floats = std::size_t(max_tokens) * std::size_t(kv_dim_);
  k_.assign(std::size_t(config.n_layers), std::vector<float>(floats));
  v_.assign(std::size_t(config.n_layers), std::vector<float>(floats));
}

void ContiguousKvCache::truncate(std::int32_t n) {
  assert(n >= 0 && n <= size_tokens_);
  size_tokens_ = n;
}

void ContiguousKvCache::set_size_tokens(std::int32_t n) {
  assert(n >= 0 && n <= max_tokens_);
  size_tokens_ = n;
}

}  // namespace pensieve::model
