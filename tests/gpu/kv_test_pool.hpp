#pragma once
// Small KV pools of one dtype filled with random F32 K/V rows, for the tests of
// the quantised KV layouts (kv_q8_0_test, kv_fp8_test).
#include "gpu/kernels/cpu/reshape_and_cache.hpp"
#include "gpu/kv/kv_pool.hpp"

#include <cstdint>
#include <initializer_list>
#include <random>
#include <vector>

namespace pensieve::testing {

// Blocks of 8 tokens over 3 layers; freed blocks keep their bytes.
inline kv::KvPoolConfig small_kv_config(kv::KvDType dtype, std::int32_t n_kv_heads, std::int32_t head_dim,
                                        std::int32_t blocks = 4) {
  kv::KvPoolConfig c;
  c.num_blocks = blocks;
  c.block_tokens = 8;
  c.n_layers = 3;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = head_dim;
  c.dtype = dtype;
  c.poison_freed = false;
  return c;
}

// n values drawn from N(0, sigma).
inline std::vector<float> normal_values(std::mt19937_64& rng, std::size_t n, float sigma) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> x(n);
  for (auto& v : x) v = d(rng);
  return x;
}

// Writes eight tokens of N(0, 1) K and V rows (seed 5) into block 0 of each
// of `layers`, the same rows in each.
inline void fill_first_block(kv::KvPool& pool, std::initializer_list<std::int32_t> layers) {
  const auto row = std::size_t(pool.config().n_kv_heads) * std::size_t(pool.config().head_dim);
  std::mt19937_64 rng(5);
  const auto k = normal_values(rng, 8 * row, 1.0f), v = normal_values(rng, 8 * row, 1.0f);
  std::vector<std::int64_t> slots{0, 1, 2, 3, 4, 5, 6, 7};
  for (std::int32_t l : layers)
    kernels::cpu::reshape_and_cache({k.data(), v.data(), kv::KvDType::f32, slots.data(), 8, pool.layer(l)});
}

}  // namespace pensieve::testing
