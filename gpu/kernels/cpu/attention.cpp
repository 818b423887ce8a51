#include "gpu/kernels/cpu/attention.hpp"

#include "gpu/kernels/cpu/rms_norm.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <vector>

namespace pensieve::kernels::cpu {

namespace {

// One (query, head): online softmax over fixed KV tiles in ascending order.
void attend_one(const AttentionParams& p, const float* q, const float* k, const float* v,
                std::int32_t n_kv, float* out, std::vector<float>& scores) {
  const std::int64_t kv_stride = std::int64_t(p.n_kv_heads) * p.head_dim;
  const std::int32_t hd = p.head_dim;
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  std::fill(out, out + hd, 0.0f);
  scores.resize(std::size_t(p.kv_tile_tokens));
  for (std::int32_t t0 = 0; t0 < n_kv; t0 += p.kv_tile_tokens) {
    const std::int32_t t1 = std::min(n_kv, t0 + p.kv_tile_tokens);
    float tile_max = -std::numeric_limits<float>::infinity();
    for (std::int32_t j = t0; j < t1; ++j) {
      const float s = dot_f32(q, k + j * kv_stride, hd) * p.scale;
      scores[std::size_t(j - t0)] = s;
      tile_max = std::max(tile_max, s);
    }
    const float m_new = std::max(m, tile_max);
    const float alpha = std::exp(m - m_new);  // 0 on the first tile
    l *= alpha;
    for (std::int32_t d = 0; d < hd; ++d) out[d] *= alpha;
    for (std::int32_t j = t0; j < t1; ++j) {
      const float pj = std::exp(scores[std::size_t(j - t0)] - m_new);
      l += pj;
      const float* vj = v + j * kv_stride;
      for (std::int32_t d = 0; d < hd; ++d) out[d] += pj * vj[d];
    }
    m = m_new;
  }
  const float inv_l = 1.0f / l;
  for (std::int32_t d = 0; d < hd; ++d) out[d] *= inv_l;
}

}  // namespace

void attention(const AttentionParams& p, std::span<const AttentionSequence> batch,
               ThreadPool& pool) {
  assert(p.n_kv_heads > 0 && p.n_heads % p.n_kv_heads == 0 && p.kv_tile_tokens > 0);
  // Work items are (sequence, query, head), numbered through prefix sums.
  std::vector<std::size_t> first_item(batch.size() + 1, 0);
  for (std::size_t s = 0; s < batch.size(); ++s) {
    first_item[s + 1] = first_item[s] + std::size_t(batch[s].n_queries) * std::size_t(p.n_heads);
  }
  const std::int32_t group = p.n_heads / p.n_kv_heads;
  double cost = 0;  // score and value multiply-adds
  for (const auto& s : batch) {
    cost += double(s.n_queries) * (double(s.start_pos) + 0.5 * s.n_queries) * 2.0 * p.head_dim * p.n_heads;
  }
  pool.parallel_for(first_item.back(), [&](std::size_t begin, std::size_t end, std::size_t) {
    std::vector<float> scores;
    auto seq = std::size_t(std::upper_bound(first_item.begin(), first_item.end(), begin) -
                           first_item.begin() - 1);
    for (std::size_t item = begin; item < end; ++item) {
      while (item >= first_item[seq + 1]) ++seq;
      const AttentionSequence& s = batch[seq];
      const std::size_t local = item - first_item[seq];
      const auto i = std::int32_t(local / std::size_t(p.n_heads));
      const auto h = std::int32_t(local % std::size_t(p.n_heads));
      const std::int64_t kv_off = std::int64_t(h / group) * p.head_dim;
      attend_one(p, s.q + i * s.q_stride + std::int64_t(h) * p.head_dim, s.k + kv_off,
                 s.v + kv_off, s.start_pos + i + 1,
                 s.out + i * s.out_stride + std::int64_t(h) * p.head_dim, scores);
    }
  }, 1, cost);
}

}  // namespace pensieve::kernels::cpu
