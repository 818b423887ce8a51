#include "gpu/kernels/cpu/matmul.hpp"

#include "gpu/kernels/cpu/dequant.hpp"
#include "gpu/kernels/cpu/matmul_rows.hpp"
#include "gpu/kernels/cpu/q8_matmul.hpp"
#include "gpu/kernels/cpu/quant_matmul.hpp"

#include <algorithm>
#include <cassert>
#include <vector>

namespace pensieve::kernels::cpu {

using model::DType;

namespace {

// Output rows per scheduling unit (a multiple of every row tile).
constexpr std::size_t row_grain = 16;

bool cpu_has_avx2() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(__x86_64__)
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

MatmulPath resolve(MatmulPath path) {
  return path == MatmulPath::best ? matmul_best_path() : path;
}

// The row kernels of `path` (resolved once per call from the CPU's features).
MatmulRowsFn rows_fn(MatmulPath path) {
  switch (resolve(path)) {
    case MatmulPath::avx512:
      assert(cpu_has_avx512());
      return matmul_rows_avx512();
    case MatmulPath::avx2:
      assert(cpu_has_avx2());
      return matmul_rows_avx2();
    case MatmulPath::best:
    case MatmulPath::portable:
      break;
  }
  return matmul_rows_portable();
}

// x as the kernels read it: a rounded copy in scratch when asked for.
ConstRowsView activations(const MatmulParams& params, ConstRowsView x, std::vector<float>& scratch) {
  if (!params.round_activations_to_f16) return x;
  scratch.resize(std::size_t(x.rows * x.cols));
  for (std::int64_t t = 0; t < x.rows; ++t) {
    std::copy_n(x.row(t), x.cols, scratch.data() + t * x.cols);
    round_to_f16(scratch.data() + t * x.cols, x.cols);
  }
  return ConstRowsView(scratch.data(), x.rows, x.cols, x.cols);
}

// Whether w takes llama.cpp's quantised-activation path.
bool integer_path(const MatmulParams& params, const WeightView& w) {
  if (model::dtype_block_elems(w.dtype) == 1 || params.float_activations) return false;
  return w.dtype != DType::q8_0 || !params.dequantize_q8_0;
}

}  // namespace

bool matmul_path_supported(MatmulPath path) {
  switch (path) {
    case MatmulPath::avx512:
      return cpu_has_avx512() && matmul_rows_avx512() != nullptr;
    case MatmulPath::avx2:
      return cpu_has_avx2() && matmul_rows_avx2() != nullptr;
    case MatmulPath::best:
    case MatmulPath::portable:
      return true;
  }
  return false;
}

MatmulPath matmul_best_path() {
  if (matmul_path_supported(MatmulPath::avx512)) return MatmulPath::avx512;
  if (matmul_path_supported(MatmulPath::avx2)) return MatmulPath::avx2;
  return MatmulPath::portable;
}

const char* matmul_path_name(MatmulPath path) {
  switch (resolve(path)) {
    case MatmulPath::avx512:
      return "avx512";
    case MatmulPath::avx2:
      return "avx2";
    case MatmulPath::best:
    case MatmulPath::portable:
      break;
  }
  return "portable";
}

void matmul(const MatmulParams& params, ConstRowsView x, const WeightView& w, RowsView y,
            ThreadPool& pool, std::vector<float>& scratch) {
  assert(x.cols == w.cols && y.cols == w.rows && y.rows == x.rows);
  x = activations(params, x, scratch);
  if (integer_path(params, w)) {
    // Integers on quantised activations; scratch already holds x when it
    // was rounded.
    std::vector<float> own;
    std::vector<float>& buf = params.round_activations_to_f16 ? own : scratch;
    // Q8_0's VNNI tiles where built in; elsewhere its AVX2/portable
    // quant_dot (the same definition, the same bits).
    if (w.dtype == DType::q8_0 && q8_vnni_available()) return q8_matmul(x, w, y, pool, buf);
    return quant_matmul(x, w, y, pool, buf);
  }
  const MatmulRowsFn run_rows_for = rows_fn(params.path);
  pool.parallel_for(
      std::size_t(w.rows),
      [&](std::size_t begin, std::size_t end, std::size_t thread) {
        run_rows_for(x, w, y, std::int64_t(begin), std::int64_t(end), pool.scratch(thread));
      },
      row_grain, double(x.rows) * double(w.rows) * double(w.cols));
}

void matmul(const MatmulParams& params, ConstRowsView x, const WeightView& w, RowsView y,
            ThreadPool& pool) {
  std::vector<float> scratch;
  matmul(params, x, w, y, pool, scratch);
}

void matmul_many(const MatmulParams& params, ConstRowsView x, std::span<const WeightView> w,
                 std::span<const RowsView> y, ThreadPool& pool, std::vector<float>& scratch) {
  assert(w.size() == y.size());
  constexpr std::size_t max_weights = 4;
  // The integer paths quantise the activations per call (Q8_0 once for all its weights), and a
  // longer list than the layer's is not worth a special case: one call each.
  bool fused = w.size() <= max_weights, all_q8 = w.size() <= q8_max_weights;
  bool all_quant = w.size() <= quant_max_weights;
  for (const WeightView& wi : w) {
    fused = fused && !integer_path(params, wi);
    all_q8 = all_q8 && wi.dtype == DType::q8_0 && integer_path(params, wi);
    // quant_matmul's types (Q8_0 only where its VNNI tiles are not built).
    all_quant = all_quant && integer_path(params, wi) &&
                !(wi.dtype == DType::q8_0 && q8_vnni_available());
  }
  if (all_q8 && q8_vnni_available() && !params.round_activations_to_f16)
    return q8_matmul_many(x, w, y, pool, scratch);  // quantised once for all
  if (all_quant && !params.round_activations_to_f16)
    return quant_matmul_many(x, w, y, pool, scratch);  // once per activation format
  if (!fused) {
    for (std::size_t i = 0; i < w.size(); ++i) matmul(params, x, w[i], y[i], pool, scratch);
    return;
  }
  x = activations(params, x, scratch);
  const MatmulRowsFn run_rows_for = rows_fn(params.path);
  // Row r of the concatenation is row r - first[i] of weight i.
  std::size_t first[max_weights + 1] = {0};
  double cost = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    assert(x.cols == w[i].cols && y[i].cols == w[i].rows && y[i].rows == x.rows);
    first[i + 1] = first[i] + std::size_t(w[i].rows);
    cost += double(x.rows) * double(w[i].rows) * double(w[i].cols);
  }
  pool.parallel_for(
      first[w.size()],
      [&](std::size_t begin, std::size_t end, std::size_t thread) {
        for (std::size_t i = 0; i < w.size(); ++i) {
          const std::size_t b = std::max(begin, first[i]), e = std::min(end, first[i + 1]);
          if (b < e) {
            run_rows_for(x, w[i], y[i], std::int64_t(b - first[i]), std::int64_t(e - first[i]),
                         pool.scratch(thread));
          }
        }
      },
      row_grain, cost);
}

}  // namespace pensieve::kernels::cpu
