// The float matmul's instruction-set paths (MatmulPath: portable, AVX2,
// AVX-512, chosen at run time): each path this CPU runs gives the 16-lane
// definition of matmul.hpp bit for bit, over odd shapes and batch sizes
// that reach every tile (decode, small-batch, panel GEMM) and every weight
// loader (F32, F16, BF16; Q8_0, Q4_0, Q4_K in registers, Q6_K and IQ4_XS
// dequantised).
#include "gpu/kernels/cpu/dequant.hpp"
#include "gpu/kernels/cpu/matmul.hpp"
#include "tests/gpu/quant_test_blocks.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace kc = pensieve::kernels::cpu;
using pensieve::model::DType;

namespace {

// Random weights: quantised blocks with sane scales, or floats stored in t.
std::vector<std::byte> random_weight(DType t, std::int64_t rows, std::int64_t cols,
                                     std::uint32_t seed) {
  const std::int64_t block = pensieve::model::dtype_block_elems(t);
  if (block > 1) return pensieve::testing::random_blocks(t, rows * cols / block, seed);
  const auto v = pensieve::testing::random_floats(rows * cols, seed);
  std::vector<std::byte> bytes(pensieve::model::dtype_row_bytes(t, cols) * std::size_t(rows));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == DType::f32) {
      std::memcpy(&bytes[4 * i], &v[i], 4);
      continue;
    }
    const std::uint16_t h =
        t == DType::f16 ? pensieve::f32_to_f16(v[i]) : pensieve::f32_to_bf16(v[i]);
    std::memcpy(&bytes[2 * i], &h, 2);
  }
  return bytes;
}

float reference_dot(const float* x, const float* w, std::int64_t n) {
  float lanes[16] = {};
  for (std::int64_t k = 0; k < n; ++k) lanes[k % 16] = std::fma(x[k], w[k], lanes[k % 16]);
  for (int width = 8; width >= 1; width /= 2)
    for (int i = 0; i < width; ++i) lanes[i] += lanes[i + width];
  return lanes[0];
}

constexpr kc::MatmulPath explicit_paths[] = {kc::MatmulPath::portable, kc::MatmulPath::avx2,
                                             kc::MatmulPath::avx512};

}  // namespace

TEST_CASE(
    "every matmul path this CPU runs gives the 16-lane definition bit for bit over odd shapes and "
    "batches",
    "[kernels]") {
  struct Case {
    DType t;
    std::int64_t in, out;
  };
  // Float k: under one vector, a masked tail, a long row over two 512-k
  // panel blocks; quantised k: whole blocks. Rows: tile edges and a split
  // between two threads.
  const Case cases[] = {{DType::f32, 7, 5},     {DType::f32, 1100, 37},  {DType::f16, 45, 61},
                        {DType::f16, 773, 50},  {DType::bf16, 101, 29},  {DType::bf16, 600, 70},
                        {DType::q8_0, 96, 45},  {DType::q4_0, 608, 37},  {DType::q4_k, 512, 41},
                        {DType::q6_k, 256, 19}, {DType::iq4_xs, 512, 23}};
  int paths_run = 0;
  for (const kc::MatmulPath path : explicit_paths) {
    if (!kc::matmul_path_supported(path)) {
      WARN("this CPU lacks the " << kc::matmul_path_name(path) << " matmul path: not run");
      continue;
    }
    ++paths_run;
    for (const Case& c : cases) {
      const auto bytes = random_weight(c.t, c.out, c.in, 17);
      const kc::WeightView w{c.t, bytes.data(), c.out, c.in,
                             pensieve::model::dtype_row_bytes(c.t, c.in)};
      std::vector<float> deq(std::size_t(c.out * c.in));
      for (std::int64_t o = 0; o < c.out; ++o)
        kc::dequantize_row(c.t, w.row(o), c.in, deq.data() + o * c.in);
      for (const std::int64_t n : {1, 2, 3, 5, 8, 9, 17, 33, 70}) {
        const auto x = pensieve::testing::random_floats(n * c.in, 23);
        for (const std::size_t threads : {1u, 2u}) {
          kc::ThreadPool pool(threads);
          kc::MatmulParams params;
          params.float_activations = true;
          params.path = path;
          std::vector<float> y(std::size_t(n * c.out));
          kc::matmul(params, kc::ConstRowsView(x.data(), n, c.in, c.in), w,
                     kc::RowsView{y.data(), n, c.out, c.out}, pool);
          std::int64_t wrong = 0;
          for (std::int64_t r = 0; r < n; ++r)
            for (std::int64_t o = 0; o < c.out; ++o) {
              const float e = reference_dot(x.data() + r * c.in, deq.data() + o * c.in, c.in);
              wrong += std::memcmp(&e, &y[std::size_t(r * c.out + o)], sizeof e) != 0;
            }
          INFO("path " << kc::matmul_path_name(path) << " dtype "
                       << pensieve::model::dtype_name(c.t) << " in " << c.in << " out " << c.out
                       << " tokens " << n << " threads " << threads);
          CHECK(wrong == 0);
        }
      }
    }
  }
  CHECK(paths_run >= 1);
}

TEST_CASE("the best matmul path is the widest one this CPU runs and has a name", "[kernels]") {
  const kc::MatmulPath best = kc::matmul_best_path();
  CHECK(kc::matmul_path_supported(best));
  CHECK(kc::matmul_path_supported(kc::MatmulPath::portable));
  if (kc::matmul_path_supported(kc::MatmulPath::avx512))
    CHECK(best == kc::MatmulPath::avx512);
  else if (kc::matmul_path_supported(kc::MatmulPath::avx2))
    CHECK(best == kc::MatmulPath::avx2);
  else
    CHECK(best == kc::MatmulPath::portable);
  CHECK(std::string(kc::matmul_path_name(kc::MatmulPath::best)) == kc::matmul_path_name(best));
  CHECK(std::string(kc::matmul_path_name(kc::MatmulPath::avx512)) == "avx512");
}
