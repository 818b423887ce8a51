#include "gpu/kernels/cpu/q8_matmul.hpp"

#include "gpu/formats/half.hpp"
#include "gpu/kernels/cpu/q8_rows_vnni.hpp"
#include "gpu/kernels/cpu/weight_kernel_guard.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace pensieve::kernels::cpu {

using model::DType;

namespace {

constexpr std::size_t q8_row_bytes_per_block = 34;  // F16 scale + 32 int8 quants

float weight_scale(const std::byte* block) {
  std::uint16_t h;
  std::memcpy(&h, block, 2);
  return f16_to_f32(h);
}

// Output rows per scheduling unit: whole decode and token tiles (8 and 16
// rows) and whole packed groups (32 rows).
constexpr std::size_t decode_grain = 16;
constexpr std::size_t batched_grain = 32;
// From this many tokens on, the packed 32-row panels of the VNNI GEMM tile;
// below, 2 tokens and more take the 16-row token tiles (BM_Q8Batch,
// 2048 x 768, one thread, 2026-12-06: 2.3x the one-token tile run per token
// at 8 tokens, 1.3x the panels at 32, level with them at 64 from the
// caches and 1.09x from DRAM). Q8Path::per_token keeps the path before the
// token tiles: the one-token tile per token below 16 tokens, the panels
// from 16 (where 408caeb measured the panels paying for their packing).
constexpr std::int64_t batched_min_tokens = 65;
constexpr std::int64_t per_token_batched_min_tokens = 16;

void rows_portable(const Q8Rows& x, const WeightView& w, const RowsView& y, std::int64_t o0,
                   std::int64_t o1) {
  for (std::int64_t t = 0; t < x.rows; ++t)
    for (std::int64_t o = o0; o < o1; ++o)
      y.row(t)[o] = q8_dot_reference(x.q_row(t), x.d_row(t), w.row(o), x.blocks());
}

}  // namespace

bool q8_vnni_available() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("f16c") &&
         __builtin_cpu_supports("fma") && q8_rows_vnni_decode() != nullptr;
#else
  return false;
#endif
}

float q8_dot_reference(const std::int8_t* xq, const float* xd, const std::byte* w_row,
                       std::int64_t n_blocks) {
  float acc = 0.0f;
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = w_row + std::size_t(b) * q8_row_bytes_per_block;
    // Copied as int8 first: GCC 12 vectorises the loop on the std::byte ->
    // int8 casts into vpdpbusd, which takes those bytes as unsigned (a
    // miscompilation, caught by kernels_q8_matmul_test.cpp).
    std::int8_t wq[32];
    std::memcpy(wq, block + 2, 32);
    std::int32_t isum = 0;
    for (int i = 0; i < 32; ++i) isum += std::int32_t(xq[b * 32 + i]) * std::int32_t(wq[i]);
    const float s = weight_scale(block) * xd[b];
    acc = std::fma(s, float(isum), acc);
  }
  return acc;
}

void q8_matmul(ConstRowsView x, const WeightView& w, RowsView y, ThreadPool& pool,
               std::vector<float>& scratch, Q8Path path) {
  q8_matmul_many(x, std::span(&w, 1), std::span(&y, 1), pool, scratch, path);
}

void q8_matmul_many(ConstRowsView x, std::span<const WeightView> w, std::span<const RowsView> y,
                    ThreadPool& pool, std::vector<float>& scratch, Q8Path path) {
  assert(w.size() == y.size() && w.size() <= q8_max_weights);
  const bool vnni = q8_vnni_available() && path != Q8Path::portable;
  const bool per_token = path == Q8Path::per_token;
  const bool batched =
      vnni && x.rows >= (per_token ? per_token_batched_min_tokens : batched_min_tokens);
  const bool token_tiles = vnni && !per_token && x.rows > 1 && !batched;
  const std::size_t grain = batched ? batched_grain : decode_grain;
  // Row r of the concatenation is row r - first[i] of weight i; each
  // weight's range starts on a whole grain so tiles never straddle two.
  std::size_t first[q8_max_weights + 1] = {0};
  double cost = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    assert(w[i].dtype == DType::q8_0 && x.cols == w[i].cols && y[i].cols == w[i].rows &&
           y[i].rows == x.rows);
    first[i + 1] = first[i] + (std::size_t(w[i].rows) + grain - 1) / grain * grain;
    cost += double(x.rows) * double(w[i].rows) * double(w[i].cols);
  }
  const Q8Rows q = quantize_rows_q8(x, scratch, batched);
  const Q8RowsFn vnni_rows = handed_out(batched       ? q8_rows_vnni_batched()
                                        : token_tiles ? q8_rows_vnni_tokens()
                                        : vnni        ? q8_rows_vnni_decode()
                                                      : nullptr,
                                        "the Q8_0 VNNI rows");
  pool.parallel_for(
      first[w.size()],
      [&](std::size_t begin, std::size_t end, std::size_t thread) {
        for (std::size_t i = 0; i < w.size(); ++i) {
          const auto o0 = std::int64_t(std::max(begin, first[i]) - first[i]);
          const auto o1 = std::min(std::int64_t(std::min(end, first[i + 1]) - first[i]), w[i].rows);
          if (o0 >= o1) continue;
          if (vnni_rows) {
            vnni_rows(q, w[i], y[i], o0, o1, pool.scratch(thread));
            continue;
          }
          rows_portable(q, w[i], y[i], o0, o1);
        }
      },
      grain, cost);
}

}  // namespace pensieve::kernels::cpu
