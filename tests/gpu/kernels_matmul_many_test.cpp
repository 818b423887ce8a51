// matmul_many (a layer's Q/K/V or gate/up in one pool dispatch) computes
// every output element exactly as one matmul() per weight does, whatever the
// thread count splits across the weights' boundaries.
#include "gpu/kernels/cpu/matmul.hpp"
#include "gpu/formats/half.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

namespace kc = pensieve::kernels::cpu;
using pensieve::model::DType;

namespace {

std::vector<std::byte> random_weight(DType dtype, std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::byte> bytes(pensieve::model::dtype_row_bytes(dtype, cols) * std::size_t(rows));
  auto put16 = [&](std::size_t at, std::uint16_t h) { std::memcpy(&bytes[at], &h, 2); };
  switch (dtype) {
    case DType::f32:
      for (std::size_t i = 0; i < bytes.size() / 4; ++i) {
        const float v = normal(rng);
        std::memcpy(&bytes[4 * i], &v, 4);
      }
      break;
    case DType::f16:
      for (std::size_t i = 0; i < bytes.size() / 2; ++i) put16(2 * i, pensieve::f32_to_f16(normal(rng)));
      break;
    case DType::bf16:
      for (std::size_t i = 0; i < bytes.size() / 2; ++i) put16(2 * i, pensieve::f32_to_bf16(normal(rng)));
      break;
    default: {  // block types with an f16 scale first (q8_0, q4_0): random quants
      const std::size_t block = pensieve::model::dtype_block_bytes(dtype);
      for (std::size_t b = 0; b < bytes.size() / block; ++b) {
        put16(b * block, pensieve::f32_to_f16(0.01f + 0.001f * float(rng() % 10)));
        for (std::size_t j = 2; j < block; ++j) bytes[b * block + j] = std::byte(rng() & 0xff);
      }
    }
  }
  return bytes;
}

}  // namespace

TEST_CASE("matmul_many over three weights gives one matmul per weight's bits, with any thread count",
          "[kernels]") {
  const std::int64_t in = 96;
  const std::int64_t rows[3] = {37, 16, 5};  // not multiples of the 16-row grain or the 8-row tile
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::q4_0, DType::q8_0}) {
    std::vector<std::vector<std::byte>> bytes;
    std::vector<kc::WeightView> w;
    for (int i = 0; i < 3; ++i) {
      bytes.push_back(random_weight(dtype, rows[i], in, 41u + unsigned(i)));
      w.push_back({dtype, bytes.back().data(), rows[i], in, pensieve::model::dtype_row_bytes(dtype, in)});
    }
    for (std::int64_t n : {1, 2, 3, 7}) {
      std::mt19937 rng(43);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> x(static_cast<std::size_t>(n * in));
      for (auto& v : x) v = normal(rng);
      const kc::ConstRowsView xv(x.data(), n, in, in);
      for (bool round : {false, true}) {
        kc::MatmulParams params;
        params.round_activations_to_f16 = round;
        kc::ThreadPool one(1);
        std::vector<float> scratch;
        std::vector<std::vector<float>> expected(3);
        for (int i = 0; i < 3; ++i) {
          expected[std::size_t(i)].assign(std::size_t(n * rows[i]), 0.0f);
          kc::matmul(params, xv, w[std::size_t(i)],
                     kc::RowsView{expected[std::size_t(i)].data(), n, rows[i], rows[i]}, one, scratch);
        }
        for (std::size_t threads : {1, 2, 3}) {
          kc::ThreadPool pool(threads, 0.0);
          std::vector<std::vector<float>> got(3);
          std::vector<kc::RowsView> y;
          for (int i = 0; i < 3; ++i) {
            got[std::size_t(i)].assign(std::size_t(n * rows[i]), -1.0f);
            y.push_back({got[std::size_t(i)].data(), n, rows[i], rows[i]});
          }
          kc::matmul_many(params, xv, w, y, pool, scratch);
          INFO("dtype " << pensieve::model::dtype_name(dtype) << ", tokens " << n << ", threads "
                        << threads << ", f16 rounding " << round);
          for (int i = 0; i < 3; ++i) {
            CHECK(std::memcmp(got[std::size_t(i)].data(), expected[std::size_t(i)].data(),
                              expected[std::size_t(i)].size() * sizeof(float)) == 0);
          }
        }
      }
    }
  }
}
