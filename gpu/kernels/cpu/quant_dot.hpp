#pragma once
// Dot products of a stored quantised weight row with an activation row
// quantised as ggml does for that type (quant_activations.hpp), computed as
// ggml's vec_dot_<type>_q8_<0|1|K>: an exact integer sum per weight block,
// then F32 steps fixed per block:
//   Q4_0, Q5_0, IQ4_NL, Q8_0:  acc = fma(d_w * d_x, isum, acc)
//   Q4_1, Q5_1:               acc = fma(d_w * d_x, isum, acc), accm = fma(m_w, s_x, accm)
//   Q3_K, Q6_K, IQ4_XS:       acc = fma(d_x * d_w, isum, acc)
//   Q2_K, Q4_K, Q5_K:         acc = fma(d_x * d_w, isum, acc),
//                             accm = fma(-(d_x * dmin_w), sum_j min_j * bsum_j, accm)
//   result = acc + accm (accm = 0 where there are no mins)
// where isum = sum_j scale_j * sum_{k in sub-block j} q_w[k] * q_x[k] for the
// K-quants (Q6_K's scales are signed, Q3_K's and IQ4_XS's 6-bit ones biased by
// -32; IQ4_XS's q_w the grid values of IQ4_NL).
// ggml's SIMD kernels add the F32 block terms in per-lane partial sums; this
// order differs from theirs only by F32 rounding of the sum (a few ulps).
//
// The vectorised paths compute the same integers (exact in any order) and
// then the same F32 steps, so every path gives the scalar reference's bits.
#include "gpu/kernels/cpu/cpu_tuning.hpp"
#include "gpu/kernels/cpu/quant_activations.hpp"

#include <cstddef>
#include <cstdint>

namespace pensieve::kernels::cpu {

enum class QuantDotPath : std::uint8_t {
  best,      // the fastest the CPU running this has: avx512, else avx2, else portable
  portable,  // the scalar reference
  avx2,      // AVX2 + FMA (quant_dot_avx2.cpp)
  avx512,    // AVX-512 F/BW/VL + VNNI (quant_dot_avx512.cpp)
};

// The quantised weight types every path implements, as X(type): the one
// list the paths' dispatch tables are made from (each path names its
// kernel for type t dot_<t>, the portable one quant_dot_<t>).
#define PENSIEVE_QUANT_DOT_TYPES(X) \
  X(q8_0) X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(iq4_nl) X(q2_k) X(q3_k) X(q4_k) X(q5_k) X(q6_k) \
  X(iq4_xs)

// One weight row of n_blocks blocks against one quantised activation row.
using QuantDotFn = float (*)(const std::byte* w_row, const QuantActRow& x, std::int64_t n_blocks);

// Whether this CPU runs `path` (a run-time check of its features; best and
// portable always).
bool quant_dot_path_supported(QuantDotPath path);

// The kernel for weight type t (quantised) on `path`: best resolves to the
// first of avx512, avx2, portable the CPU supports. An explicit path the CPU
// lacks gives null (the caller decides: the tests skip it).
QuantDotFn quant_dot_fn(model::DType t, QuantDotPath path);

// The path quant_dot_fn(t, best) takes on this CPU, its name ("avx512-vnni",
// "avx2", "portable"), and whether it is vectorised.
QuantDotPath quant_dot_best_path(model::DType t);
const char* quant_dot_path_name(QuantDotPath path);
bool quant_dot_vectorised(model::DType t);
// The instruction set of the best path on this CPU (the same for every type).
const char* quant_dot_isa();

// One weight row of n_blocks blocks against n_rows activation rows (1 to
// quant_dot_rows_max): y[t * y_stride] = the QuantDotFn of row t, bit for
// bit. The weight's blocks are unpacked once for all the rows (a decode batch
// of several sequences), not once per row.
constexpr int quant_dot_rows_max = 8;
using QuantDotRowsFn = void (*)(const std::byte* w_row, const QuantActRow* x, int n_rows,
                                std::int64_t n_blocks, float* y, std::int64_t y_stride);

// The multi-row kernel of type t on `path` (best as quant_dot_fn resolves
// it); null where that path has none for t (the caller loops over
// quant_dot_fn's kernel): AVX-512 for Q4_K, Q5_K, Q6_K and IQ4_XS.
QuantDotRowsFn quant_dot_rows_fn(model::DType t, QuantDotPath path);

// Eight weight rows, row_bytes apart from w, against one activation row (a
// decode step of one sequence): y[r] = the QuantDotFn of row r, bit for bit,
// stored for the rows whose bit r is set in `store` (the others are read and
// computed, never stored). The activation's blocks are loaded once for the
// eight rows and each row's F32 steps run in a lane of one vector chain.
// [pf, pf + pf_bytes) is fetched into the L2 in step with the blocks (the
// next tile's rows; pf may be null).
constexpr int quant_dot_tile_rows = 8;
using QuantDotTileFn = void (*)(const std::byte* w, std::size_t row_bytes, const QuantActRow& x,
                                std::int64_t n_blocks, float* y, unsigned store,
                                const std::byte* pf, std::size_t pf_bytes);

// The tile kernel of type t on `path` (best as quant_dot_fn resolves it);
// null where that path has none for t: AVX-512 VNNI for Q4_K, Q5_K, Q6_K and
// IQ4_XS (quant_tiles_avx512.cpp: one vpdpbusd per 64 weights, the scales
// applied to the packed sums, IQ4_XS's to 32-bit ones).
QuantDotTileFn quant_dot_tile_fn(model::DType t, QuantDotPath path);

// Eight weight rows against 1 to quant_dot_tile_tokens_max activation rows
// (a decode batch): y[t * y_stride + r] = the QuantDotFn of weight row r and
// activation row t, bit for bit, stored for the rows of `store` as
// QuantDotTileFn does. Each block of the 8 rows is read and unpacked once
// and multiplied into every token's integer sums, which are reduced 8 rows
// at a time; token t's F32 steps run in the lanes of its own vector chain.
constexpr int quant_dot_tile_tokens_max = 4;
using QuantDotTokenTileFn = void (*)(const std::byte* w, std::size_t row_bytes,
                                     const QuantActRow* x, int n_tokens, std::int64_t n_blocks,
                                     float* y, std::int64_t y_stride, unsigned store,
                                     const std::byte* pf, std::size_t pf_bytes);

// The token tile of type t on `path` (best as quant_dot_fn resolves it);
// null where that path has none for t: AVX-512 for Q4_K, Q5_K and Q6_K,
// AVX2 (with F16C) for Q8_0 (quant_tiles_avx2.cpp).
QuantDotTokenTileFn quant_dot_token_tile_fn(model::DType t, QuantDotPath path);

// Sixteen weight rows against 1 to quant_dot_lane_tile_tokens_max activation
// rows (a decode batch), each weight row in one 32-bit lane
// (quant_lane_tiles_avx512.cpp): y[t * y_stride + r] = the QuantDotFn of
// weight row r and activation row t, bit for bit, stored for the rows whose
// bit r of `store` is set; [pf, pf + pf_bytes) is fetched in step (pf may
// be null). No reduction per block: the integer sums of the 16 rows
// accumulate in the lanes of one vector.
constexpr int quant_dot_lane_tile_rows = 16;
constexpr int quant_dot_lane_tile_tokens_max = 8;
using QuantDotLaneTileFn = QuantDotTokenTileFn;  // the same call, 16 rows and up to 8 tokens

// The lane tile of type t on `path` (best as quant_dot_fn resolves it),
// prefetching as `pf` says (the CPU's tuning names it: cpu_tuning.hpp; a
// panel takes l1_by_group as l1);
// null where that path has none for t: AVX-512 VNNI for Q4_K, Q5_K, Q6_K and
// IQ4_XS.
QuantDotLaneTileFn quant_dot_lane_tile_fn(model::DType t, QuantDotPath path, PrefetchInto pf);

// The same 16 rows against any number of activation rows (prefill chunks):
// the rows' blocks are unpacked once into `scratch`
// (quant_dot_lane_panel_bytes, 64-byte aligned, the caller's), then
// every group of up to quant_dot_lane_tile_tokens_max tokens runs from it;
// y, store and pf as QuantDotLaneTileFn's, with its bits. AVX-512 VNNI has
// them for Q4_K, Q5_K, Q6_K and IQ4_XS, and for the types with panels only (their
// batches of any size run here): Q2_K, Q3_K and the legacy blocks of 32
// (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL).
constexpr std::size_t quant_dot_lane_panel_block_bytes = 5760;  // a K-quant block
std::size_t quant_dot_lane_panel_bytes(model::DType t, std::int64_t n_blocks);
using QuantDotLanePanelFn = void (*)(const std::byte* w, std::size_t row_bytes,
                                     const QuantActRow* x, int n_tokens, std::int64_t n_blocks,
                                     float* y, std::int64_t y_stride, unsigned store,
                                     void* scratch, const std::byte* pf, std::size_t pf_bytes);
QuantDotLanePanelFn quant_dot_lane_panel_fn(model::DType t, QuantDotPath path, PrefetchInto pf);

// The scalar references (the definitions), one per type.
float quant_dot_q8_0(const std::byte* w, const QuantActRow& x, std::int64_t nb);
float quant_dot_q4_0(const std::byte* w, const QuantActRow& x, std::int64_t nb);
float quant_dot_q4_1(const std::byte* w, const QuantActRow& x, std::int64_t nb);
float quant_dot_q5_0(const std::byte* w, const QuantActRow& x, std::int64_t nb);
float quant_dot_q5_1(const std::byte* w, const QuantActRow& x, std::int64_t nb);
float quant_dot_iq4_nl(const std::byte* w, const QuantActRow& x, std::int64_t nb);
float quant_dot_q2_k(const std::byte* w, const QuantActRow& x, std::int64_t nb);
float quant_dot_q3_k(const std::byte* w, const QuantActRow& x, std::int64_t nb);
float quant_dot_q4_k(const std::byte* w, const QuantActRow& x, std::int64_t nb);
float quant_dot_q5_k(const std::byte* w, const QuantActRow& x, std::int64_t nb);
float quant_dot_q6_k(const std::byte* w, const QuantActRow& x, std::int64_t nb);
float quant_dot_iq4_xs(const std::byte* w, const QuantActRow& x, std::int64_t nb);

// The AVX2 kernels (quant_dot_avx2.cpp, compiled for AVX2 + FMA whatever the
// build's -march; call only where the CPU has them). Null where a type has
// none yet.
QuantDotFn quant_dot_avx2_fn(model::DType t);

// The AVX-512 kernels (quant_dot_avx512.cpp, compiled for AVX-512 F/BW/VL +
// VNNI whatever the -march; call only where the CPU has them). Null where a
// type has none, or on a non-x86 build.
QuantDotFn quant_dot_avx512_fn(model::DType t);
QuantDotRowsFn quant_dot_avx512_rows_fn(model::DType t);
QuantDotTileFn quant_dot_avx512_tile_fn(model::DType t);
QuantDotTokenTileFn quant_dot_avx512_token_tile_fn(model::DType t);
QuantDotTokenTileFn quant_dot_avx2_token_tile_fn(model::DType t);
QuantDotLaneTileFn quant_dot_avx512_lane_tile_fn(model::DType t, PrefetchInto pf);
QuantDotLanePanelFn quant_dot_avx512_lane_panel_fn(model::DType t, PrefetchInto pf);
QuantDotLanePanelFn quant_dot_avx512_legacy_panel_fn(model::DType t, PrefetchInto pf);  // blocks of 32

}  // namespace pensieve::kernels::cpu
