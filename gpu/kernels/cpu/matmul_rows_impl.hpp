#pragma once
// The float matmul's row kernels (internal to the matmul_rows_<isa>.cpp
// files): rows [o0, o1) of y = x . w^T for F32, F16, BF16 and quantised
// weights on float activations, the tiles chosen by batch size as matmul.hpp
// describes. Each matmul_rows_<isa>.cpp includes this once, under its
// instruction set's target (kernel_isa.hpp), so the same source gives the
// portable, AVX2 and AVX-512 kernels; none of it is compiled anywhere else.
#include "gpu/kernels/cpu/dequant.hpp"
#include "gpu/kernels/cpu/dot_tile.hpp"
#include "gpu/kernels/cpu/gemm_tile.hpp"
#include "gpu/kernels/cpu/matmul_batch_tile.hpp"
#include "gpu/kernels/cpu/matmul_rows.hpp"

#include <algorithm>
#include <cassert>
#include <type_traits>
#include <vector>

namespace pensieve::kernels::cpu {
inline namespace PENSIEVE_KERNEL_NS {

using model::DType;

namespace {

// Up to this many tokens the weights are read straight from their rows, two
// tokens per pass over 8 rows (the later passes find the rows in the L1);
// beyond it the blocked path converts them once into an F32 panel shared by
// all tokens. A decode step of a few sequences is the case between.
// BM_MatmulSmallBatch (one thread, 2048 x 768, weights in the L3), row
// passes vs panel: F16 at 4 tokens 92 vs 35 GFLOP/s, at 8 93 vs 63, at 32
// 93 vs 85 (converting a half in registers is cheap; re-reading it from the
// L1 is too); F32 at 4 72 vs 31, at 8 58 vs 56, at 12 58 vs 69.
template <class Loader>
constexpr std::int64_t decode_max_tokens() {
  if constexpr (std::is_same_v<Loader, LoadF16> || std::is_same_v<Loader, LoadBF16>) return 64;
  return 8;
}

// Rows [o0, o1) four at a time, tokens four at a time: what is left over
// after the 8-row tiles.
template <class Loader>
void run_rows_by_4(const ConstRowsView& x, const WeightView& w, const RowsView& y, std::int64_t o0,
                   std::int64_t o1) {
  for (std::int64_t o = o0; o < o1; o += 4) {
    const int n_out = int(std::min<std::int64_t>(4, o1 - o));
    for (std::int64_t t = 0; t < x.rows; t += 4) {
      const int n_tok = int(std::min<std::int64_t>(4, x.rows - t));
      dot_tile<Loader>(n_tok, n_out, x.row(t), x.stride, w.row(o), w.row_bytes, w.cols,
                       y.row(t) + o, y.stride);
    }
  }
}

// Decode tiles of C weight rows over rows [o0, o1), the tokens two by two
// (each row read once per pair); the first pair prefetches the next tile's
// rows in step (Burst: in bursts of C lines), or for F32 only their heads,
// first (prefetch_row_heads, dot_tile.hpp). Returns where the whole tiles
// end.
template <class Loader, int C, bool Burst>
std::int64_t run_decode_tiles(const ConstRowsView& x, const WeightView& w, const RowsView& y,
                              std::int64_t o0, std::int64_t o1) {
  constexpr bool heads_only = std::is_same_v<Loader, LoadF32>;
  std::int64_t o = o0;
  for (; o + C <= o1; o += C) {
    const std::byte* next = w.row(o + C);
    const std::byte* next_end = w.row(std::min(o1, o + 2 * C));
    if (heads_only) prefetch_row_heads(next, next_end, w.row_bytes);
    // A burst fetches whole tiles: none after the range's last full one.
    const std::byte* pf = heads_only || (Burst && o + 2 * C > o1) ? nullptr : next;
    const std::byte* pf_end = heads_only ? nullptr : next_end;
    for (std::int64_t t = 0; t < x.rows; t += 2) {
      if (t > 0) {  // the first pair fetched them
        pf_end = pf;
        if (Burst) pf = nullptr;
      }
      if (x.rows - t >= 2) {
        dot_tile_fixed<Loader, 2, C, Burst>(x.row(t), x.stride, w.row(o), w.row_bytes, w.cols,
                                            y.row(t) + o, y.stride, pf, pf_end);
      } else {
        dot_tile_fixed<Loader, 1, C, Burst>(x.row(t), x.stride, w.row(o), w.row_bytes, w.cols,
                                            y.row(t) + o, y.stride, pf, pf_end);
      }
    }
  }
  return o;
}

// A decode step of up to decode_max_tokens tokens: tiles of 8 weight rows;
// one F16 token 4-row tiles with burst prefetches (f16_tile_rows,
// dot_tile.hpp: fewer streams, DRAM-bound); what is left by run_rows_by_4.
// Several F16 tokens keep 8 rows: there the conversions, shared by each
// pair of tokens, bound the tile, and 4 rows cost 25-30% of the rate
// (BM_MatmulSmallBatch, 3-32 tokens).
template <class Loader>
void run_rows_decode(const ConstRowsView& x, const WeightView& w, const RowsView& y,
                     std::int64_t o0, std::int64_t o1) {
  const std::int64_t o = std::is_same_v<Loader, LoadF16> && x.rows == 1
                             ? run_decode_tiles<Loader, f16_tile_rows, true>(x, w, y, o0, o1)
                             : run_decode_tiles<Loader, gemv_tile_rows, false>(x, w, y, o0, o1);
  run_rows_by_4<Loader>(x, w, y, o, o1);
}

#if defined(PENSIEVE_DOT_AVX512)

// Batches: weight rows in blocks of 64 and k in blocks of 512 (a multiple of
// 32: quantised blocks stay whole). A block of weights is converted once into
// a contiguous F32 panel (64 x 512 x 4 = 128 KiB, in L2) and reused by every
// token; F32 weights are copied too (their rows, 4 KiB apart and more, would
// collide in the L1's sets). Tiles of 6 tokens x
// 4 rows sweep up to 240 tokens over the panel, parking each element's 16 lane
// accumulators in a per-thread buffer between k blocks. That changes where
// partial sums live, never the order of the FMAs, so every path agrees bit
// for bit with dot_tile_fixed.
constexpr std::int64_t rows_block = 16 * gemm_tile_rows;
constexpr std::int64_t k_block = 512;
// Tokens per pass over a row block (a multiple of the 6-token tile): bounds
// the parked accumulators to 240 x 64 x 16 floats (960 KiB) per thread.
constexpr std::int64_t tokens_block = 40 * gemm_tile_tokens;

struct BlockedScratch {
  float* panel;  // rows_block x k_block
  float* acc;    // tokens_block x rows_block x 16
};

BlockedScratch blocked_scratch(std::vector<float>& buf) {
  const std::size_t panel = std::size_t(rows_block * k_block);
  const std::size_t acc = std::size_t(tokens_block * rows_block * 16);
  if (buf.size() < panel + acc) buf.resize(panel + acc);
  return {buf.data(), buf.data() + panel};
}

template <class Loader>
void run_rows_blocked(const ConstRowsView& x, const WeightView& w, const RowsView& y,
                      std::int64_t o0, std::int64_t o1, std::vector<float>& buf) {
  const BlockedScratch s = blocked_scratch(buf);
  for (std::int64_t ob = o0; ob < o1; ob += rows_block) {
    const std::int64_t oe = std::min(o1, ob + rows_block);
    for (std::int64_t tb = 0; tb < x.rows; tb += tokens_block) {
      const std::int64_t te = std::min(x.rows, tb + tokens_block);
      for (std::int64_t k0 = 0; k0 < w.cols; k0 += k_block) {
        const std::int64_t k1 = std::min(w.cols, k0 + k_block);
        const bool first = k0 == 0, last = k1 == w.cols;
        for (std::int64_t o = ob; o < oe; ++o)
          dequant_panel_row<Loader>(w.row(o), k0, k1, s.panel + (o - ob) * k_block);
        for (std::int64_t t = tb; t < te; t += gemm_tile_tokens) {
          const int n_tok = int(std::min<std::int64_t>(gemm_tile_tokens, te - t));
          for (std::int64_t o = ob; o < oe; o += gemm_tile_rows) {
            const int n_out = int(std::min<std::int64_t>(gemm_tile_rows, oe - o));
            float* acc = s.acc + ((t - tb) * rows_block + (o - ob) * n_tok) * 16;
            gemm_tile_any(n_tok, n_out, x.row(t) + k0, x.stride, s.panel + (o - ob) * k_block,
                          k_block, k1 - k0, acc, first, last, y.row(t) + o, y.stride);
          }
        }
      }
    }
  }
}

#else  // portable: the accumulating 4 x 4 tile of dot_tile.hpp

constexpr std::int64_t rows_block = 64;
constexpr std::int64_t tokens_block = 64;
constexpr std::int64_t k_block = 1024;
constexpr std::int64_t tile_floats = 4 * 4 * 16;

template <class Loader>
void run_rows_blocked(const ConstRowsView& x, const WeightView& w, const RowsView& y,
                      std::int64_t o0, std::int64_t o1, std::vector<float>& acc) {
  acc.resize(std::size_t(rows_block / 4 * tokens_block / 4 * tile_floats));
  for (std::int64_t ob = o0; ob < o1; ob += rows_block) {
    const std::int64_t oe = std::min(o1, ob + rows_block);
    for (std::int64_t tb = 0; tb < x.rows; tb += tokens_block) {
      const std::int64_t te = std::min(x.rows, tb + tokens_block);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t k0 = 0; k0 < w.cols; k0 += k_block) {
        const std::int64_t k1 = std::min(w.cols, k0 + k_block);
        for (std::int64_t t = tb; t < te; t += 4) {
          const int n_tok = int(std::min<std::int64_t>(4, te - t));
          for (std::int64_t o = ob; o < oe; o += 4) {
            float* tile =
                acc.data() + ((t - tb) / 4 * (rows_block / 4) + (o - ob) / 4) * tile_floats;
            dot_tile_acc<Loader>(n_tok, int(std::min<std::int64_t>(4, oe - o)), x.row(t), x.stride,
                                 w.row(o), w.row_bytes, k0, k1, tile);
          }
        }
      }
      for (std::int64_t t = tb; t < te; t += 4) {
        const int n_tok = int(std::min<std::int64_t>(4, te - t));
        for (std::int64_t o = ob; o < oe; o += 4) {
          const int n_out = int(std::min<std::int64_t>(4, oe - o));
          const float* tile =
              acc.data() + ((t - tb) / 4 * (rows_block / 4) + (o - ob) / 4) * tile_floats;
          for (int r = 0; r < n_tok; ++r)
            for (int c = 0; c < n_out; ++c)
              y.row(t + r)[o + c] = hsum_lanes(tile + (r * n_out + c) * 16);
        }
      }
    }
  }
}

#endif

#if defined(PENSIEVE_DOT_AVX512)

// Small batches of F32/F16/BF16 weights (matmul_batch_tile.hpp): 2 up to
// this many tokens; beyond, the panel GEMM. BM_MatmulBatch (2048 x 768, one
// thread, AMD EPYC Zen 5, 2026-12-06, results/2026-12-06-amd-zen5-small-
// batch-to-64.md), this tile vs the halves' 2 x 8 decode tiles (16, 32
// tokens) and the panel GEMM (64), GFLOP/s from DRAM: F16 at 16 tokens 198
// vs 125, at 32 199 vs 140, at 64 209 vs 186; F32 at 32 176 vs 128, at 64
// 188 vs 172. From the caches only F16 at 64 loses (205 vs 219); a decode
// batch reads its weights from DRAM. (On the Intel Xeon of 2026-12-02 the
// decode tiles led from 8 tokens from the L3, measured before the
// -mtune=generic fix that made this tile 1.4-1.8x faster there.)
template <class Loader>
constexpr std::int64_t small_batch_max_tokens() {
  if constexpr (std::is_same_v<Loader, LoadF16> || std::is_same_v<Loader, LoadBF16> ||
                std::is_same_v<Loader, LoadF32>)
    return 64;
  return 0;
}

// Blocks of batch_block_rows rows; in each, the tokens in near-equal groups
// of at most batch_tile_tokens (9 tokens as 5 + 4, not 8 + 1: a 1-token
// group converts a weight vector per FMA pair), the first group fetching
// the next block's rows into the L2 as it streams its own.
template <class Loader>
void run_rows_small_batch(const ConstRowsView& x, const WeightView& w, const RowsView& y,
                          std::int64_t o0, std::int64_t o1) {
  const std::int64_t groups = (x.rows + batch_tile_tokens - 1) / batch_tile_tokens;
  const std::int64_t base = x.rows / groups, wider = x.rows % groups;
  for (std::int64_t ob = o0; ob < o1; ob += batch_block_rows) {
    const std::int64_t oe = std::min(o1, ob + batch_block_rows);
    std::int64_t t = 0;
    for (std::int64_t g = 0; g < groups; ++g) {
      const int n = int(base + (g < wider ? 1 : 0));
      batch_tile_rows_any<Loader>(n, x, t, w, y, ob, oe, g == 0, oe - ob, o1);
      t += n;
    }
  }
}

#endif

template <class Loader>
void run_rows(const ConstRowsView& x, const WeightView& w, const RowsView& y, std::int64_t o0,
              std::int64_t o1, std::vector<float>& buf) {
#if defined(PENSIEVE_DOT_AVX512)
  if (x.rows >= 2 && x.rows <= small_batch_max_tokens<Loader>())
    return run_rows_small_batch<Loader>(x, w, y, o0, o1);
#endif
  if (x.rows <= decode_max_tokens<Loader>()) return run_rows_decode<Loader>(x, w, y, o0, o1);
  run_rows_blocked<Loader>(x, w, y, o0, o1, buf);
}

// Types without a register loader: rows_block rows at a time dequantised
// into F32 rows, then the F32 kernels on them (the same values, so the same
// bits as the F32 matmul on the dequantised weight).
void run_rows_dequantised(const ConstRowsView& x, const WeightView& w, const RowsView& y,
                          std::int64_t o0, std::int64_t o1, std::vector<float>& buf) {
  constexpr std::int64_t rows_at_once = 64;
  std::vector<float> rows(std::size_t(std::min(rows_at_once, o1 - o0) * w.cols));
  for (std::int64_t o = o0; o < o1; o += rows_at_once) {
    const std::int64_t n = std::min(rows_at_once, o1 - o);
    for (std::int64_t r = 0; r < n; ++r)
      dequantize_row(w.dtype, w.row(o + r), w.cols, rows.data() + r * w.cols);
    const WeightView f{DType::f32, reinterpret_cast<const std::byte*>(rows.data()), n, w.cols,
                       std::size_t(w.cols) * sizeof(float)};
    const RowsView yo{y.data + o, y.rows, n, y.stride};
    run_rows<LoadF32>(x, f, yo, 0, n, buf);
  }
}

void run_rows_for(const ConstRowsView& x, const WeightView& w, const RowsView& y, std::int64_t o0,
                  std::int64_t o1, std::vector<float>& buf) {
  switch (w.dtype) {
    case DType::f32:
      return run_rows<LoadF32>(x, w, y, o0, o1, buf);
    case DType::f16:
      return run_rows<LoadF16>(x, w, y, o0, o1, buf);
    case DType::bf16:
      return run_rows<LoadBF16>(x, w, y, o0, o1, buf);
    case DType::q8_0:
      return run_rows<LoadQ8_0>(x, w, y, o0, o1, buf);
    case DType::q4_0:
      return run_rows<LoadQ4_0>(x, w, y, o0, o1, buf);
    case DType::q4_k:
      return run_rows<LoadQ4_K>(x, w, y, o0, o1, buf);
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::iq4_nl:
    case DType::q2_k:
    case DType::q3_k:
    case DType::q5_k:
    case DType::q6_k:
    case DType::iq4_xs:
      return run_rows_dequantised(x, w, y, o0, o1, buf);
  }
  assert(false && "matmul: unsupported weight type");
}

}  // namespace

// The entry point the matmul_rows_<isa>.cpp file hands out.
inline void matmul_rows_kernel(const ConstRowsView& x, const WeightView& w, const RowsView& y,
                               std::int64_t o0, std::int64_t o1, std::vector<float>& buf) {
  run_rows_for(x, w, y, o0, o1, buf);
}

}  // namespace PENSIEVE_KERNEL_NS
}  // namespace pensieve::kernels::cpu
