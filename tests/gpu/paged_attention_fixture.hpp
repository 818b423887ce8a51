#pragma once
// Random ragged batches over a paged KV pool for the attention tests, and the
// naive contiguous F64 reference they are checked against.
#include "gpu/kernels/cpu/attention_contiguous.hpp"
#include "gpu/kernels/cpu/attention_pool_runner.hpp"
#include "gpu/kernels/cpu/paged_attention_params.hpp"
#include "gpu/kernels/cpu/reshape_and_cache.hpp"
#include "gpu/kernels/cpu/thread_pool.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "gpu/formats/half.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

namespace pensieve::test {

// The forward pass's thread pool (every loop on the workers) as a kernel runner.
struct PooledRunner {
  kernels::cpu::ThreadPool pool;
  kernels::cpu::ThreadPoolRunner runner;
  explicit PooledRunner(std::size_t threads) : pool(threads, 0.0), runner(pool) {}
};

struct BatchSpec {
  std::vector<std::int32_t> context_tokens;
  std::vector<std::int32_t> q_lens;
  std::int32_t n_kv_heads = 2;
  std::int32_t group = 4;  // query heads per KV head
  std::int32_t head_dim = 64;
  std::int32_t block_tokens = 16;
  kv::KvDType dtype = kv::KvDType::f32;
  bool shuffle_blocks = true;
  bool share_prefixes = true;  // neighbouring sequences share their leading full blocks
};

// Values never zero: uniform in [-1, -0.05] u [0.05, 1].
inline float nonzero_uniform(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d(0.05f, 1.0f);
  const float x = d(rng);
  return (rng() & 1) ? x : -x;
}

inline float round_to(kv::KvDType t, float x) {
  if (t == kv::KvDType::f16) return f16_to_f32(f32_to_f16(x));
  if (t == kv::KvDType::bf16) return bf16_to_f32(f32_to_bf16(x));
  return x;
}

struct Batch {
  BatchSpec spec;
  std::int32_t n_heads = 0;
  std::vector<std::int32_t> q_start;
  std::vector<std::int32_t> block_table;
  std::int32_t max_blocks = 0;
  std::vector<float> q;  // [rows][n_heads][head_dim]
  // What each sequence's cache holds, contiguous: [kv_start[s] + pos][n_kv_heads][head_dim].
  std::vector<std::int64_t> kv_start;
  std::vector<float> k, v;
  std::unique_ptr<kv::KvPool> pool;

  std::int32_t num_seqs() const { return std::int32_t(spec.context_tokens.size()); }
  std::int32_t rows() const { return q_start.back(); }
  std::int64_t out_elems() const { return std::int64_t(rows()) * n_heads * spec.head_dim; }
  float scale() const { return 1.0f / std::sqrt(float(spec.head_dim)); }

  kernels::PagedAttentionParams params(float* out) const {
    kernels::PagedAttentionParams p;
    p.q = q.data();
    p.out = out;
    p.kv = pool->layer(0);
    p.q_start = q_start.data();
    p.context_tokens = spec.context_tokens.data();
    p.block_table = block_table.data();
    p.max_blocks_per_seq = max_blocks;
    p.num_seqs = num_seqs();
    p.n_heads = n_heads;
    p.softmax_scale = scale();
    return p;
  }

  // The same batch read from the contiguous copies (k, v, kv_start).
  kernels::cpu::ContiguousAttentionParams contiguous_params(float* out) const {
    kernels::cpu::ContiguousAttentionParams p;
    p.q = q.data();
    p.out = out;
    p.k = k.data();
    p.v = v.data();
    p.kv_start = kv_start.data();
    p.q_start = q_start.data();
    p.context_tokens = spec.context_tokens.data();
    p.num_seqs = num_seqs();
    p.n_heads = n_heads;
    p.n_kv_heads = spec.n_kv_heads;
    p.head_dim = spec.head_dim;
    p.softmax_scale = scale();
    return p;
  }
};

// Physical blocks are a random permutation of the pool; a sequence may take
// over the leading full blocks of the one before it (same K/V values there).
inline Batch make_batch(const BatchSpec& spec, std::mt19937_64& rng) {
  Batch b;
  b.spec = spec;
  b.n_heads = spec.n_kv_heads * spec.group;
  const std::int32_t n = b.num_seqs(), bt = spec.block_tokens, hd = spec.head_dim;
  const std::int64_t row = std::int64_t(spec.n_kv_heads) * hd;
  b.q_start.assign(1, 0);
  for (std::int32_t s = 0; s < n; ++s) b.q_start.push_back(b.q_start.back() + spec.q_lens[s]);
  std::int32_t total_blocks = 0;
  for (std::int32_t s = 0; s < n; ++s) {
    const std::int32_t blocks = (spec.context_tokens[s] + bt - 1) / bt;
    b.max_blocks = std::max(b.max_blocks, blocks);
    total_blocks += blocks;
  }
  std::vector<std::int32_t> physical(std::size_t(total_blocks) + 3);
  std::iota(physical.begin(), physical.end(), 0);
  if (spec.shuffle_blocks) std::shuffle(physical.begin(), physical.end(), rng);
  kv::KvPoolConfig config;
  config.num_blocks = std::int32_t(physical.size());
  config.block_tokens = bt;
  config.n_kv_heads = spec.n_kv_heads;
  config.head_dim = hd;
  config.dtype = spec.dtype;
  config.poison_freed = false;
  b.pool = std::make_unique<kv::KvPool>(config);
  for (std::int32_t blk = 0; blk < config.num_blocks; ++blk)
    b.pool->poison(kv::BlockId{std::uint32_t(blk)});

  b.block_table.assign(std::size_t(n) * std::size_t(b.max_blocks), -1);
  b.kv_start.assign(std::size_t(n) + 1, 0);
  for (std::int32_t s = 0; s < n; ++s) b.kv_start[s + 1] = b.kv_start[s] + spec.context_tokens[s];
  b.k.resize(std::size_t(b.kv_start[n] * row));
  b.v.resize(b.k.size());
  std::size_t next_physical = 0;
  for (std::int32_t s = 0; s < n; ++s) {
    const std::int32_t ctx = spec.context_tokens[s], blocks = (ctx + bt - 1) / bt;
    std::int32_t shared = 0;
    if (spec.share_prefixes && s > 0 && (rng() % 2) == 0) {
      const std::int32_t full = std::min(spec.context_tokens[s - 1], ctx - 1) / bt;
      shared = full > 0 ? std::int32_t(rng() % std::uint64_t(full + 1)) : 0;
    }
    std::int32_t* table = b.block_table.data() + std::int64_t(s) * b.max_blocks;
    for (std::int32_t j = 0; j < blocks; ++j) {
      table[j] = j < shared ? table[j - b.max_blocks] : physical[next_physical++];
    }
    const std::int64_t shared_tokens = std::int64_t(shared) * bt;
    float* ks = b.k.data() + b.kv_start[s] * row;
    float* vs = b.v.data() + b.kv_start[s] * row;
    std::copy_n(b.k.data() + b.kv_start[s - (s > 0)] * row, shared_tokens * row, ks);
    std::copy_n(b.v.data() + b.kv_start[s - (s > 0)] * row, shared_tokens * row, vs);
    std::vector<float> kin(std::size_t((ctx - shared_tokens) * row)), vin(kin.size());
    for (auto& x : kin) x = nonzero_uniform(rng);
    for (auto& x : vin) x = nonzero_uniform(rng);
    std::vector<std::int64_t> slots;
    for (std::int64_t pos = shared_tokens; pos < ctx; ++pos)
      slots.push_back(std::int64_t(table[pos / bt]) * bt + pos % bt);
    kernels::ReshapeAndCacheParams w;
    w.k = kin.data();
    w.v = vin.data();
    w.slots = slots.data();
    w.num_tokens = std::int32_t(slots.size());
    w.cache = b.pool->layer(0);
    kernels::cpu::reshape_and_cache(w);
    for (std::size_t i = 0; i < kin.size(); ++i) {
      ks[shared_tokens * row + std::int64_t(i)] = round_to(spec.dtype, kin[i]);
      vs[shared_tokens * row + std::int64_t(i)] = round_to(spec.dtype, vin[i]);
    }
  }
  b.q.resize(std::size_t(std::int64_t(b.rows()) * b.n_heads * hd));
  for (auto& x : b.q) x = round_to(spec.dtype, nonzero_uniform(rng) * 2.0f);
  return b;
}

// Naive contiguous attention in F64; window > 0: a query at position p sees
// keys (p - window, p]; softcap > 0: scores become softcap * tanh(s / softcap).
inline std::vector<double> reference_attention(const Batch& b, std::int32_t window = 0, double softcap = 0) {
  const std::int32_t hd = b.spec.head_dim, group = b.spec.group;
  const std::int64_t row = std::int64_t(b.spec.n_kv_heads) * hd;
  std::vector<double> out(std::size_t(b.out_elems()));
  std::vector<double> scores;
  for (std::int32_t s = 0; s < b.num_seqs(); ++s) {
    const std::int32_t ctx = b.spec.context_tokens[s], q_len = b.q_start[s + 1] - b.q_start[s];
    const float* ks = b.k.data() + b.kv_start[s] * row;
    const float* vs = b.v.data() + b.kv_start[s] * row;
    for (std::int32_t i = 0; i < q_len; ++i) {
      const std::int32_t keys = ctx - q_len + i + 1;
      const std::int32_t first = window > 0 ? std::max(0, keys - window) : 0;
      for (std::int32_t h = 0; h < b.n_heads; ++h) {
        const std::int64_t kvh = h / group;
        const float* q = b.q.data() + (std::int64_t(b.q_start[s] + i) * b.n_heads + h) * hd;
        scores.assign(std::size_t(keys), 0.0);
        double m = -INFINITY;
        for (std::int32_t j = first; j < keys; ++j) {
          double dot = 0;
          for (std::int32_t d = 0; d < hd; ++d)
            dot += double(q[d]) * double(ks[j * row + kvh * hd + d]);
          scores[j] = dot * double(b.scale());
          if (softcap > 0) scores[j] = softcap * std::tanh(scores[j] / softcap);
          m = std::max(m, scores[j]);
        }
        double l = 0;
        for (std::int32_t j = first; j < keys; ++j) l += (scores[j] = std::exp(scores[j] - m));
        double* o = out.data() + (std::int64_t(b.q_start[s] + i) * b.n_heads + h) * hd;
        for (std::int32_t j = first; j < keys; ++j) {
          for (std::int32_t d = 0; d < hd; ++d)
            o[d] += scores[j] / l * double(vs[j * row + kvh * hd + d]);
        }
      }
    }
  }
  return out;
}

// The largest, over (row, head) vectors, of max |out - ref| / max |ref|; NaN
// (an element never written) makes it infinite.
inline double max_relative_error(const std::vector<float>& out, const std::vector<double>& ref,
                                 std::int32_t head_dim) {
  double worst = 0;
  for (std::size_t base = 0; base < ref.size(); base += std::size_t(head_dim)) {
    double err = 0, mag = 0;
    for (std::int32_t d = 0; d < head_dim; ++d) {
      if (!std::isfinite(out[base + d])) return INFINITY;
      err = std::max(err, std::abs(double(out[base + d]) - ref[base + d]));
      mag = std::max(mag, std::abs(ref[base + d]));
    }
    worst = std::max(worst, err / mag);
  }
  return worst;
}

}  // namespace pensieve::test
