// The Q8_0 matmul's AVX-512 VNNI rows (q8_tiles.hpp), compiled for AVX-512
// F/BW/VL/DQ + VNNI whatever the build's -march; q8_matmul.cpp calls them
// only on a CPU that has those. As in matmul_rows_avx512.cpp, everything but
// the ISA-namespaced tile header comes before the target pragma.
#include "gpu/kernels/cpu/q8_rows_vnni.hpp"

#if defined(__x86_64__)
#include "gpu/kernels/cpu/prefetch.hpp"
#include "gpu/kernels/cpu/q8_matmul.hpp"

#include <immintrin.h>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#define PENSIEVE_KERNEL_ISA 3
#define PENSIEVE_KERNEL_VNNI 1
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
#include "gpu/kernels/cpu/q8_tiles.hpp"
#include "gpu/kernels/cpu/q8_token_tiles.hpp"

namespace pensieve::kernels::cpu {
inline namespace PENSIEVE_KERNEL_NS {
namespace {

void rows_decode(const Q8Rows& x, const WeightView& w, const RowsView& y, std::int64_t o0,
                 std::int64_t o1, std::vector<float>&) {
  if (w.rows < q8_gemv_rows) {  // too few rows for one tile: the definition
    for (std::int64_t t = 0; t < x.rows; ++t)
      for (std::int64_t o = o0; o < o1; ++o)
        y.row(t)[o] = q8_dot_reference(x.q_row(t), x.d_row(t), w.row(o), x.blocks());
    return;
  }
  for (std::int64_t o = o0; o < o1; o += q8_gemv_rows) {
    // A last tile of fewer than 8 rows moves down to end at the weight's
    // last row; the rows below o it recomputes (maybe another thread's) are
    // read, never stored.
    const std::int64_t start = std::min(o, w.rows - q8_gemv_rows);
    const auto count = unsigned(std::min<std::int64_t>(o1 - o, q8_gemv_rows));
    const auto store = __mmask8(((1u << count) - 1u) << unsigned(o - start));
    // The first token's pass prefetches the next tile's rows (contiguous
    // with these) in step; the last tile of the range has none to fetch.
    const std::byte* next = o + 2 * q8_gemv_rows <= o1 ? w.row(o + q8_gemv_rows) : nullptr;
    for (std::int64_t t = 0; t < x.rows; ++t)
      q8_gemv_tile(x.q_row(t), x.d_row(t), w.row(start), w.row_bytes, x.blocks(), y.row(t) + start,
                   store, t == 0 ? next : nullptr);
  }
}

// Every token by tiles of 16 rows x up to q8_token_tile_tokens_max tokens,
// the token groups near-equal in size; a tile's rows stay in the L1 while
// the groups after the first pass over them, and the first group fetches
// the next tile's rows in step. A last tile of fewer than 16 rows moves down
// as rows_decode's does. Weights of fewer rows than a tile: rows_decode.
void rows_tokens(const Q8Rows& x, const WeightView& w, const RowsView& y, std::int64_t o0,
                 std::int64_t o1, std::vector<float>& buf) {
  constexpr std::int64_t n = q8_token_tile_rows;
  if (w.rows < n) return rows_decode(x, w, y, o0, o1, buf);
  const std::int64_t groups = (x.rows + q8_token_tile_tokens_max - 1) / q8_token_tile_tokens_max;
  const std::int64_t base = x.rows / groups, wider = x.rows % groups;
  const std::byte* bias = q8_token_bias(x, buf);
  for (std::int64_t o = o0; o < o1; o += n) {
    const std::int64_t start = std::min(o, w.rows - n);
    const auto count = unsigned(std::min(o1 - o, n));
    const auto store = __mmask16(((1u << count) - 1u) << unsigned(o - start));
    const std::byte* next = o + 2 * n <= o1 ? w.row(o + n) : nullptr;
    std::int64_t t = 0;
    for (std::int64_t g = 0; g < groups; ++g) {
      const int tokens = int(base + (g < wider ? 1 : 0));
      q8_token_tile_any(tokens, x, t, bias, w.row(start), w.row_bytes, x.blocks(), y.row(t) + start,
                        y.stride, store, g == 0 ? next : nullptr);
      t += tokens;
    }
  }
}

void rows_batched(const Q8Rows& x, const WeightView& w, const RowsView& y, std::int64_t o0,
                  std::int64_t o1, std::vector<float>& buf) {
  const std::int64_t nb = x.blocks();
  const Q8Panel panel = q8_panel(buf, nb);
  for (std::int64_t o = o0; o < o1; o += q8_panel_rows) {
    const int n_rows = int(std::min<std::int64_t>(q8_panel_rows, o1 - o));
    q8_pack_panel(w, o, n_rows, nb, panel);
    std::int64_t t = 0;
    for (; t + q8_tile_tokens <= x.rows; t += q8_tile_tokens)
      q8_gemm_tile<q8_tile_tokens>(x, t, panel, nb, y, o, n_rows);
    q8_gemm_tile_any(int(x.rows - t), x, t, panel, nb, y, o, n_rows);
  }
}

}  // namespace
}  // namespace PENSIEVE_KERNEL_NS
}  // namespace pensieve::kernels::cpu
#pragma GCC pop_options
#endif

namespace pensieve::kernels::cpu {

Q8RowsFn q8_rows_vnni_decode() {
#if defined(__x86_64__)
  return &rows_decode;
#else
  return nullptr;
#endif
}

Q8RowsFn q8_rows_vnni_tokens() {
#if defined(__x86_64__)
  return &rows_tokens;
#else
  return nullptr;
#endif
}

Q8RowsFn q8_rows_vnni_batched() {
#if defined(__x86_64__)
  return &rows_batched;
#else
  return nullptr;
#endif
}

}  // namespace pensieve::kernels::cpu
