#pragma once
// The arithmetic of CPU attention, in one translation unit so that it is
// compiled once: every loop order (per-sequence, split-KV, packed, prefill
// tiles, contiguous) calls these same functions, which is what makes their
// results bit-identical and batch-invariant. Products are explicit fma and
// reductions run in a fixed order, so the bits do not depend on the
// compiler's contraction choices at a call site either.
//
// A softmax state of one (query row, head) over a set of keys is hd + 2
// floats: [m, l, acc[0..hd)] with m = max score, l = sum exp(s - m) and
// acc = sum exp(s - m) * v.
#include <cstdint>

namespace pensieve::kernels::cpu {

inline constexpr std::int32_t attention_state_floats(std::int32_t head_dim) {
  return head_dim + 2;
}

// The state of query `q` over keys k[0..n_keys) and values v[0..n_keys)
// (each a pointer to head_dim floats); n_keys >= 1. `scores` holds n_keys floats.
// The plain one-query loop: the definition attention_tile_states() keeps bit
// for bit, and its path for head sizes other than 32, 64 and 128.
// softcap > 0: each scaled score s becomes softcap * tanh(s / softcap)
// (Gemma 2's attention logit soft-capping).
void attention_tile_state(const float* q, const float* const* k, const float* const* v,
                          std::int32_t n_keys, std::int32_t head_dim, float scale, float* scores,
                          float* state, float softcap = 0.0f);

// attention_tile_state() for each of the n_q queries q[0..n_q) (the query
// heads of one KV head) over the same keys and values, into states[i]: the
// same bits as n_q calls, with each key and value read once for all of them
// (a tile of K and V sits in the L2, and reading it once per query head made
// prefill attention L2-bound). `scores` holds n_q * n_keys floats.
// (softcap > 0 takes the one-query loop for every query.)
void attention_tile_states(const float* const* q, std::int32_t n_q, const float* const* k,
                           const float* const* v, std::int32_t n_keys, std::int32_t head_dim,
                           float scale, float* scores, float* const* states, float softcap = 0.0f);

// Whether attention_tile_states_f16() has a kernel for this head size and
// soft-cap on this build (AVX-512, head_dim 32, 64 or 128, no soft-cap).
bool attention_tile_states_f16_direct(std::int32_t head_dim, float softcap);

// attention_tile_states() over F16 keys and values read where they are
// stored (an F16 pool's rows), each element widened exactly as it is loaded:
// the bits of widening the rows to F32 first and calling
// attention_tile_states(), without writing and re-reading the widened tile
// (at 128 tokens of head_dim 64, 64 KiB of F32 K and V: past the L1, and
// the widening took 46% of M-100's decode attention over 8 x 1024 tokens,
// AMD Zen 5, 2026-12-06). Only where attention_tile_states_f16_direct().
// `next`: the rows of the tile the caller takes after this one, asked for
// in the L2 while this one computes, key j of the next beside key j of this
// (a tile ahead: the pool's rows come from DRAM in a decode step, where the
// weights stream through the caches between a layer's attention and the
// same layer's in the next step).
struct AttentionNextRows {
  const std::uint16_t* const* k = nullptr;
  const std::uint16_t* const* v = nullptr;
  std::int32_t count = 0;
};
void attention_tile_states_f16(const float* const* q, std::int32_t n_q,
                               const std::uint16_t* const* k, const std::uint16_t* const* v,
                               std::int32_t n_keys, std::int32_t head_dim, float scale,
                               float* scores, float* const* states, AttentionNextRows next = {});

// The state of no keys at all (l = 0): attention_fold() treats it as the
// identity on either side. A split row's tiles outside its window hold it.
void attention_empty_state(float* state, std::int32_t head_dim);

// state <- the state over the union of both key sets (`next`'s keys come later).
// An empty state on either side leaves the other one's bits.
void attention_fold(float* state, const float* next, std::int32_t head_dim);

// out = acc / l.
void attention_finish(const float* state, std::int32_t head_dim, float* out);

}  // namespace pensieve::kernels::cpu
