#include "gpu/kernels/cpu/rope.hpp"

#include <cassert>
#include <cmath>
#include <numbers>

namespace pensieve::kernels::cpu {

std::vector<float> rope_inv_freq(const RopeParams& p, std::span<const float> divisors) {
  const int half = p.rope_dims / 2;
  std::vector<float> inv(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) {
    // Computed as llama2.c does (1 / powf), so its checkpoints match it exactly.
    inv[std::size_t(i)] = 1.0f / std::pow(p.theta, float(2 * i) / float(p.rope_dims));
  }
  const auto& s = p.scaling;
  if (s.type == RopeScalingType::linear) {
    for (auto& f : inv) f /= s.factor;
  } else if (s.type == RopeScalingType::llama3) {
    const float low_wavelen = float(s.original_context) / s.low_freq_factor;
    const float high_wavelen = float(s.original_context) / s.high_freq_factor;
    for (auto& f : inv) {
      const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f /= s.factor;
      } else {
        const float smooth = (float(s.original_context) / wavelen - s.low_freq_factor) /
                             (s.high_freq_factor - s.low_freq_factor);
        f = (1.0f - smooth) * f / s.factor + smooth * f;
      }
    }
  }
  assert(divisors.empty() || divisors.size() == inv.size());
  for (std::size_t i = 0; i < divisors.size(); ++i) inv[i] /= divisors[i];
  return inv;
}

void rope(const RopeParams& p, std::span<const float> inv_freq, RowsView rows,
          std::span<const std::int32_t> positions) {
  assert(std::int64_t(positions.size()) == rows.rows);
  assert(std::int64_t(inv_freq.size()) == p.rope_dims / 2);
  const int half = p.rope_dims / 2;
  std::vector<float> cos_v(static_cast<std::size_t>(half)), sin_v(static_cast<std::size_t>(half));
  for (std::int64_t t = 0; t < rows.rows; ++t) {
    const float pos = float(positions[std::size_t(t)]);
    for (int i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[std::size_t(i)];
      cos_v[std::size_t(i)] = std::cos(angle) * p.scaling.attn_factor;
      sin_v[std::size_t(i)] = std::sin(angle) * p.scaling.attn_factor;
    }
    for (int h = 0; h < p.n_heads; ++h) {
      float* x = rows.row(t) + std::int64_t(h) * p.head_dim;
      for (int i = 0; i < half; ++i) {
        const int a = p.style == RopeStyle::interleaved ? 2 * i : i;
        const int b = p.style == RopeStyle::interleaved ? 2 * i + 1 : i + half;
        const float x0 = x[a], x1 = x[b], c = cos_v[std::size_t(i)], s = sin_v[std::size_t(i)];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace pensieve::kernels::cpu
