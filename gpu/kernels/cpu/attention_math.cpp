#include "gpu/kernels/cpu/attention_math.hpp"

#include "gpu/kernels/cpu/exp_approx.hpp"
#include "gpu/kernels/cpu/prefetch.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>

#include "gpu/kernels/cpu/lane_sums.hpp"
// GCC 12 reports its own _mm512_undefined_* placeholders as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// Two implementations of the same arithmetic: AVX-512 intrinsics and a
// portable scalar one. Both accumulate dot products in 16 lanes (element d in
// lane d % 16) and reduce them in the same tree, so they agree bit for bit.
namespace pensieve::kernels::cpu {
namespace {

constexpr int kLanes = 16;

// Loops over registers (a query's or a sum's 16-lane chunks) must be unrolled
// completely, or GCC keeps the arrays on the stack and every key's update
// waits for the previous key's store.
#define PENSIEVE_ATT_UNROLL _Pragma("GCC unroll 16")
#if defined(__AVX512F__)
inline __mmask16 tail_mask(std::int32_t n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}

// lanes[l] + lanes[l + 8], then + 4, + 2, + 1: the scalar path's tree.
inline float reduce16(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  const __m128 d = _mm_add_ss(c, _mm_movehdup_ps(c));
  return _mm_cvtss_f32(d);
}

inline float dot(const float* a, const float* b, std::int32_t n) {
  __m512 acc = _mm512_setzero_ps();
  std::int32_t d = 0;
  for (; d + kLanes <= n; d += kLanes)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + d), _mm512_loadu_ps(b + d), acc);
  if (d < n) {
    const __mmask16 m = tail_mask(n - d);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + d), _mm512_maskz_loadu_ps(m, b + d), acc);
  }
  return reduce16(acc);
}

inline void axpy(float a, const float* x, float* y, std::int32_t n) {
  const __m512 va = _mm512_set1_ps(a);
  std::int32_t d = 0;
  for (; d + kLanes <= n; d += kLanes) {
    _mm512_storeu_ps(y + d, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + d), _mm512_loadu_ps(y + d)));
  }
  for (; d < n; ++d) y[d] = std::fma(a, x[d], y[d]);
}
#else
inline float dot(const float* a, const float* b, std::int32_t n) {
  float lanes[kLanes] = {};
  for (std::int32_t d = 0; d < n; ++d) lanes[d % kLanes] = std::fma(a[d], b[d], lanes[d % kLanes]);
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

inline void axpy(float a, const float* x, float* y, std::int32_t n) {
  for (std::int32_t d = 0; d < n; ++d) y[d] = std::fma(a, x[d], y[d]);
}
#endif

// x[j] <- exp(x[j] - m) and returns their sum: x[j] added into lane j % 16
// in ascending j, the lanes then reduced in the dot products' tree. (A
// running scalar sum made every key wait for the previous key's add.)
float exp_shifted_sum(float* x, std::int32_t n, float m) {
#if defined(__AVX512F__)
  const __m512 vm = _mm512_set1_ps(m);
  __m512 lanes = _mm512_setzero_ps();
  std::int32_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j), vm));
    _mm512_storeu_ps(x + j, e);
    lanes = _mm512_add_ps(lanes, e);
  }
  if (j < n) {
    const __mmask16 t = tail_mask(n - j);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(t, x + j), vm));
    _mm512_mask_storeu_ps(x + j, t, e);
    lanes = _mm512_mask_add_ps(lanes, t, lanes, e);
  }
  return reduce16(lanes);
#else
  float lanes[kLanes] = {};
  for (std::int32_t j = 0; j < n; ++j) {
    x[j] = exp_one(x[j] - m);
    lanes[j % kLanes] += x[j];
  }
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
#endif
}

}  // namespace

void attention_tile_state(const float* q, const float* const* k, const float* const* v,
                          std::int32_t n_keys, std::int32_t head_dim, float scale, float* scores,
                          float* state, float softcap) {
  float m = -INFINITY;
  for (std::int32_t j = 0; j < n_keys; ++j) {
    scores[j] = dot(q, k[j], head_dim) * scale;
    if (softcap > 0.0f) scores[j] = softcap * std::tanh(scores[j] / softcap);
    m = std::max(m, scores[j]);
  }
  const float l = exp_shifted_sum(scores, n_keys, m);
  state[0] = m;
  float* acc = state + 2;
  std::fill(acc, acc + head_dim, 0.0f);
  for (std::int32_t j = 0; j < n_keys; ++j) axpy(scores[j], v[j], acc, head_dim);
  state[1] = l;
}

#if defined(__AVX512F__)
namespace {

// Sixteen elements of a key or value row as F32: F32 rows as they are, F16
// rows (an F16 pool's, read in place) widened exactly.
inline __m512 load16(const float* p) {
  return _mm512_loadu_ps(p);
}
inline __m512 load16(const std::uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// The rows of key and value j, asked for in the L2 ahead of their use: an
// F16 pool's rows are read in place, from wherever the pool's pages are.
template <int C, class T>
inline void prefetch_rows(const T* const* k, const T* const* v, std::int32_t j) {
  constexpr int lines = (16 * C * int(sizeof(T)) + 63) / 64;
  PENSIEVE_ATT_UNROLL
  for (int l = 0; l < lines; ++l) {
    prefetch_l2(reinterpret_cast<const char*>(k[j]) + 64 * l);
    prefetch_l2(reinterpret_cast<const char*>(v[j]) + 64 * l);
  }
}

// Keys ahead of the one in use that the first query's pass asks for.
constexpr std::int32_t prefetch_keys = 8;

// The rows of the next tile from key `begin` to before `end`, a tile ahead.
template <int C>
inline void prefetch_next(const AttentionNextRows& next, std::int32_t begin, std::int32_t end) {
  for (std::int32_t i = begin; i < std::min(end, next.count); ++i)
    prefetch_rows<C>(next.k, next.v, i);
}

// The scores of H queries q[h] (head_dim 16 * C) against keys k[0..n_keys),
// scaled, into scores + h * n_keys, and their maxima into m[h]. Eight keys'
// dot products are reduced at once (lane_sums.hpp): the same lane sums and
// tree as dot(), so the same bits as one key and one query at a time. Each
// key chunk is loaded (and widened) once for the H queries, whose chunks the
// FMAs read from memory: one query a pass widened every F16 key once per
// query head (3 times for M-100's groups of 3). H * 8 sums stay in the
// registers up to H = 3.
template <int C, int H, class T, bool Prefetch = false>
void tile_scores_heads(const float* const* q, const T* const* k, const T* const* v,
                       std::int32_t n_keys, float scale, float* scores, float* m,
                       const AttentionNextRows& next = {}) {
  static_assert(H >= 1 && H <= 3);
  if constexpr (Prefetch) {
    for (std::int32_t j = 0; j < std::min(prefetch_keys, n_keys); ++j) prefetch_rows<C>(k, v, j);
  }
  const __m512 vscale = _mm512_set1_ps(scale);
  // max_ps(s, m) keeps m where s is NaN, as std::max(m, s) does below.
  __m512 vmax[H];
  PENSIEVE_ATT_UNROLL
  for (int h = 0; h < H; ++h) vmax[h] = _mm512_set1_ps(-INFINITY);
  std::int32_t j = 0;
  for (; j + 8 <= n_keys; j += 8) {
    if constexpr (Prefetch) {
      for (std::int32_t i = j + prefetch_keys; i < std::min(j + 2 * prefetch_keys, n_keys); ++i)
        prefetch_rows<C>(k, v, i);
      prefetch_next<C>(next, j, j + 8);
    }
    __m512 acc[H][8];
    PENSIEVE_ATT_UNROLL
    for (int i = 0; i < 8; ++i) {
      PENSIEVE_ATT_UNROLL
      for (int h = 0; h < H; ++h) acc[h][i] = _mm512_setzero_ps();
      PENSIEVE_ATT_UNROLL
      for (int c = 0; c < C; ++c) {
        const __m512 kc = load16(k[j + i] + 16 * c);
        PENSIEVE_ATT_UNROLL
        for (int h = 0; h < H; ++h)
          acc[h][i] = _mm512_fmadd_ps(_mm512_loadu_ps(q[h] + 16 * c), kc, acc[h][i]);
      }
    }
    PENSIEVE_ATT_UNROLL
    for (int h = 0; h < H; ++h) {
      const __m512 sc = _mm512_mul_ps(hsum16_many<8>(acc[h]), vscale);
      _mm512_mask_storeu_ps(scores + std::int64_t(h) * n_keys + j, 0xff, sc);
      vmax[h] = _mm512_mask_max_ps(vmax[h], 0xff, sc, vmax[h]);
    }
  }
  if constexpr (Prefetch) prefetch_next<C>(next, j, next.count);
  PENSIEVE_ATT_UNROLL
  for (int h = 0; h < H; ++h) m[h] = _mm512_reduce_max_ps(vmax[h]);
  for (; j < n_keys; ++j) {
    PENSIEVE_ATT_UNROLL
    for (int h = 0; h < H; ++h) {
      __m512 acc = _mm512_setzero_ps();
      PENSIEVE_ATT_UNROLL
      for (int c = 0; c < C; ++c)
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(q[h] + 16 * c), load16(k[j] + 16 * c), acc);
      float* sh = scores + std::int64_t(h) * n_keys;
      sh[j] = reduce16(acc) * scale;
      m[h] = std::max(m[h], sh[j]);
    }
  }
}

// G queries of head_dim 16 * C at once; G * C <= 16 keeps the value sums in
// registers. Per query, every operation is the one attention_tile_state()
// does, in the same order.
template <int C, int G, class T>
void tile_states_group(const float* const* q, const T* const* k, const T* const* v,
                       std::int32_t n_keys, float scale, float* scores, float* const* states,
                       const AttentionNextRows& next = {}) {
  static_assert(G * C <= 16);
  float m[G], l[G];
  // The scores three queries at a time (a fourth would push the sums out of
  // the registers); the first pass asks for an F16 pool's rows.
  constexpr bool in_place = std::is_same_v<T, std::uint16_t>;
  constexpr int first = G == 4 ? 2 : G;
  tile_scores_heads<C, first, T, in_place>(q, k, v, n_keys, scale, scores, m, next);
  if constexpr (G > first)
    tile_scores_heads<C, G - first, T>(q + first, k, v, n_keys, scale,
                                       scores + std::int64_t(first) * n_keys, m + first);
  PENSIEVE_ATT_UNROLL
  for (int g = 0; g < G; ++g)
    l[g] = exp_shifted_sum(scores + std::int64_t(g) * n_keys, n_keys, m[g]);
  __m512 acc[G][C];
  PENSIEVE_ATT_UNROLL
  for (int g = 0; g < G; ++g) {
    PENSIEVE_ATT_UNROLL
    for (int c = 0; c < C; ++c) acc[g][c] = _mm512_setzero_ps();
  }
  for (std::int32_t j = 0; j < n_keys; ++j) {
    __m512 p[G];
    PENSIEVE_ATT_UNROLL
    for (int g = 0; g < G; ++g) p[g] = _mm512_set1_ps(scores[std::int64_t(g) * n_keys + j]);
    PENSIEVE_ATT_UNROLL
    for (int c = 0; c < C; ++c) {
      const __m512 vv = load16(v[j] + 16 * c);
      PENSIEVE_ATT_UNROLL
      for (int g = 0; g < G; ++g) acc[g][c] = _mm512_fmadd_ps(p[g], vv, acc[g][c]);
    }
  }
  PENSIEVE_ATT_UNROLL
  for (int g = 0; g < G; ++g) {
    states[g][0] = m[g];
    states[g][1] = l[g];
    PENSIEVE_ATT_UNROLL
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(states[g] + 2 + 16 * c, acc[g][c]);
  }
}

// Up to 16 / C queries per pass; 0 when this head_dim has no grouped path.
template <int C, class T>
std::int32_t tile_states_some(const float* const* q, std::int32_t n_q, const T* const* k,
                              const T* const* v, std::int32_t n_keys, float scale, float* scores,
                              float* const* states, const AttentionNextRows& next = {}) {
  constexpr int max_g = std::min(4, 16 / C);
  const int g = std::min<std::int32_t>(n_q, max_g);
  switch (g) {
    case 1:
      tile_states_group<C, 1, T>(q, k, v, n_keys, scale, scores, states, next);
      break;
    case 2:
      tile_states_group<C, 2, T>(q, k, v, n_keys, scale, scores, states, next);
      break;
    case 3:
      if constexpr (3 <= max_g)
        tile_states_group<C, 3, T>(q, k, v, n_keys, scale, scores, states, next);
      break;
    case 4:
      if constexpr (4 <= max_g)
        tile_states_group<C, 4, T>(q, k, v, n_keys, scale, scores, states, next);
      break;
    default: break;
  }
  return g;
}

// The grouped path for this head size (16 * C for C = 2, 4, 8): queries
// done, 0 when there is none.
template <class T>
std::int32_t tile_states_for_dim(std::int32_t head_dim, const float* const* q, std::int32_t n_q,
                                 const T* const* k, const T* const* v, std::int32_t n_keys,
                                 float scale, float* scores, float* const* states,
                                 const AttentionNextRows& next = {}) {
  switch (head_dim) {
    case 32:
      return tile_states_some<2, T>(q, n_q, k, v, n_keys, scale, scores, states, next);
    case 64:
      return tile_states_some<4, T>(q, n_q, k, v, n_keys, scale, scores, states, next);
    case 128:
      return tile_states_some<8, T>(q, n_q, k, v, n_keys, scale, scores, states, next);
    default: return 0;
  }
}

}  // namespace
#endif

void attention_tile_states(const float* const* q, std::int32_t n_q, const float* const* k,
                           const float* const* v, std::int32_t n_keys, std::int32_t head_dim,
                           float scale, float* scores, float* const* states, float softcap) {
  for (std::int32_t i = 0; i < n_q;) {
    std::int32_t done = 0;
#if defined(__AVX512F__)
    if (softcap <= 0.0f)
      done = tile_states_for_dim(head_dim, q + i, n_q - i, k, v, n_keys, scale, scores, states + i);
#endif
    if (done == 0) {
      attention_tile_state(q[i], k, v, n_keys, head_dim, scale, scores, states[i], softcap);
      done = 1;
    }
    i += done;
  }
}

bool attention_tile_states_f16_direct(std::int32_t head_dim, float softcap) {
#if defined(__AVX512F__)
  return softcap <= 0.0f && (head_dim == 32 || head_dim == 64 || head_dim == 128);
#else
  (void)head_dim;
  (void)softcap;
  return false;
#endif
}

void attention_tile_states_f16(const float* const* q, std::int32_t n_q,
                               const std::uint16_t* const* k, const std::uint16_t* const* v,
                               std::int32_t n_keys, std::int32_t head_dim, float scale,
                               float* scores, float* const* states, AttentionNextRows next) {
#if defined(__AVX512F__)
  for (std::int32_t i = 0; i < n_q;) {
    // The first group's pass asks for the next tile; later groups find it asked for.
    const std::int32_t done =
        tile_states_for_dim(head_dim, q + i, n_q - i, k, v, n_keys, scale, scores, states + i,
                            i == 0 ? next : AttentionNextRows{});
    assert(done > 0 && "attention_tile_states_f16: check attention_tile_states_f16_direct first");
    i += done;
  }
#else
  (void)q, (void)n_q, (void)k, (void)v, (void)n_keys, (void)head_dim, (void)scale, (void)scores,
      (void)states, (void)next;
  assert(false && "attention_tile_states_f16: check attention_tile_states_f16_direct first");
#endif
}

void attention_empty_state(float* state, std::int32_t head_dim) {
  state[0] = -INFINITY;
  std::fill(state + 1, state + 2 + head_dim, 0.0f);
}

void attention_fold(float* state, const float* next, std::int32_t head_dim) {
  // A real state has l >= 1 (its largest score contributes exp(0)).
  if (next[1] == 0.0f) return;
  if (state[1] == 0.0f) {
    std::copy(next, next + 2 + head_dim, state);
    return;
  }
  const float m = std::max(state[0], next[0]);
  const float a = exp_one(state[0] - m), b = exp_one(next[0] - m);
  state[0] = m;
  state[1] = std::fma(state[1], a, next[1] * b);
  float* acc = state + 2;
  const float* nacc = next + 2;
  std::int32_t d = 0;
#if defined(__AVX512F__)
  const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
  for (; d + kLanes <= head_dim; d += kLanes) {
    _mm512_storeu_ps(acc + d, _mm512_fmadd_ps(_mm512_loadu_ps(acc + d), va,
                                              _mm512_mul_ps(_mm512_loadu_ps(nacc + d), vb)));
  }
#endif
  for (; d < head_dim; ++d) acc[d] = std::fma(acc[d], a, nacc[d] * b);
}

void attention_finish(const float* state, std::int32_t head_dim, float* out) {
  const float inv = 1.0f / state[1];
  for (std::int32_t d = 0; d < head_dim; ++d) out[d] = state[2 + d] * inv;
}

}  // namespace pensieve::kernels::cpu
