// Q4_K weights: dequantize_row against a scalar reference written from
// ggml's block_q4_K layout, and the matmul on Q4_K weights equal to the F32
// matmul on their dequantised copy, alone or in a batch.
#include "gpu/kernels/cpu/dequant.hpp"
#include "gpu/kernels/cpu/matmul.hpp"
#include "gpu/formats/half.hpp"
#include "tests/gpu/quant_test_blocks.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

namespace kc = pensieve::kernels::cpu;
using pensieve::model::DType;

namespace {

constexpr std::size_t block_bytes = 144;

// ggml's dequantize_row_q4_K loop structure: 64 elements per pass, the low
// nibbles of 32 bytes then their high nibbles.
std::vector<float> reference_dequant(const std::byte* row, std::int64_t n) {
  std::vector<float> y;
  for (std::int64_t b = 0; b < n / 256; ++b) {
    const auto* blk = reinterpret_cast<const std::uint8_t*>(row + b * block_bytes);
    std::uint16_t dh, mh;
    std::memcpy(&dh, blk, 2);
    std::memcpy(&mh, blk + 2, 2);
    const float d = pensieve::f16_to_f32(dh), min = pensieve::f16_to_f32(mh);
    const std::uint8_t* scales = blk + 4;
    const std::uint8_t* q = blk + 16;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
      int sc, m;
      pensieve::testing::reference_scale_min(is, scales, sc, m);
      const float d1 = d * float(sc), m1 = min * float(m);
      pensieve::testing::reference_scale_min(is + 1, scales, sc, m);
      const float d2 = d * float(sc), m2 = min * float(m);
      for (int l = 0; l < 32; ++l) y.push_back(d1 * float(q[l] & 0xF) - m1);
      for (int l = 0; l < 32; ++l) y.push_back(d2 * float(q[l] >> 4) - m2);
    }
  }
  return y;
}

std::vector<std::byte> random_q4_k(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> bytes(std::size_t(rows * cols / 256) * block_bytes);
  for (std::size_t b = 0; b < bytes.size() / block_bytes; ++b) {
    std::byte* blk = bytes.data() + b * block_bytes;
    for (std::size_t i = 4; i < block_bytes; ++i) blk[i] = std::byte(rng() & 0xff);
    const std::uint16_t d = pensieve::f32_to_f16(0.001f + 0.002f * float(rng() % 100) / 100.0f);
    const std::uint16_t m = pensieve::f32_to_f16(0.004f * float(rng() % 100) / 100.0f);
    std::memcpy(blk, &d, 2);
    std::memcpy(blk + 2, &m, 2);
  }
  return bytes;
}

std::vector<float> random_rows(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (auto& v : x) v = normal(rng);
  return x;
}

std::vector<float> run(const kc::WeightView& w, const float* x, std::int64_t n_tokens, std::size_t threads) {
  kc::ThreadPool pool(threads, 0.0);
  std::vector<float> y(std::size_t(n_tokens * w.rows));
  kc::MatmulParams params;
  params.float_activations = true;  // the F32 path; quant_dot tests cover the default
  kc::matmul(params, kc::ConstRowsView(x, n_tokens, w.cols, w.cols), w,
             kc::RowsView{y.data(), n_tokens, w.rows, w.rows}, pool);
  return y;
}

bool same_bits(const float* a, const float* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("q4_k rows dequantise exactly as ggml's reference loop", "[kernels]") {
  const std::int64_t cols = 768;
  const auto bytes = random_q4_k(3, cols, 17);
  const std::size_t row_bytes = pensieve::model::dtype_row_bytes(DType::q4_k, cols);
  REQUIRE(row_bytes == 3 * block_bytes);
  for (std::int64_t r = 0; r < 3; ++r) {
    std::vector<float> got(static_cast<std::size_t>(cols));
    kc::dequantize_row(DType::q4_k, bytes.data() + r * row_bytes, cols, got.data());
    const auto want = reference_dequant(bytes.data() + r * row_bytes, cols);
    REQUIRE(want.size() == got.size());
    CHECK(same_bits(got.data(), want.data(), got.size()));
  }
}

TEST_CASE("a q4_k block with chosen scales gives the values its layout defines", "[kernels]") {
  std::vector<std::byte> blk(block_bytes, std::byte{0});
  const std::uint16_t one = pensieve::f32_to_f16(1.0f), half = pensieve::f32_to_f16(0.5f);
  std::memcpy(blk.data(), &one, 2);
  std::memcpy(blk.data() + 2, &half, 2);
  // Sub-block 1: scale 3, min 2 (bytes 1 and 5); sub-block 5: scale 17
  // (low 4 bits in byte 9, high 2 bits in byte 1's top bits), min 0.
  blk[4 + 1] = std::byte(3 | (1 << 6));
  blk[4 + 5] = std::byte(2);
  blk[4 + 9] = std::byte(1);
  blk[16 + 0] = std::byte(0x70);   // element 32 (sub-block 1, high nibble of byte 0): q 7
  blk[16 + 64] = std::byte(0x90);  // element 160 (sub-block 5, high nibble of byte 64): q 9
  std::vector<float> y(256);
  kc::dequantize_row(DType::q4_k, blk.data(), 256, y.data());
  CHECK(y[32] == 3.0f * 7.0f - 0.5f * 2.0f);
  CHECK(y[33] == -1.0f);  // q 0 in sub-block 1: just the min
  CHECK(y[160] == 17.0f * 9.0f);
  CHECK(y[0] == 0.0f);
}

TEST_CASE("a q4_k matmul on float activations equals the f32 matmul on its dequantised copy, alone and in a batch",
          "[kernels]") {
  const std::int64_t rows = 45, cols = 1280, tokens = 9;  // k blocks of 512 end mid-superblock-run
  const auto bytes = random_q4_k(rows, cols, 23);
  const std::size_t row_bytes = pensieve::model::dtype_row_bytes(DType::q4_k, cols);
  const kc::WeightView q4k{DType::q4_k, bytes.data(), rows, cols, row_bytes};
  std::vector<float> deq(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    kc::dequantize_row(DType::q4_k, q4k.row(r), cols, deq.data() + r * cols);
  const kc::WeightView f32{DType::f32, reinterpret_cast<const std::byte*>(deq.data()), rows, cols,
                           std::size_t(cols) * 4};
  const auto x = random_rows(tokens * cols, 29);
  const auto batch = run(q4k, x.data(), tokens, 2);
  CHECK(same_bits(batch.data(), run(f32, x.data(), tokens, 2).data(), batch.size()));
  for (std::int64_t t = 0; t < tokens; ++t) {
    INFO("token " << t);
    for (std::size_t threads : {1u, 2u}) {
      const auto alone = run(q4k, x.data() + t * cols, 1, threads);
      CHECK(same_bits(alone.data(), batch.data() + t * rows, std::size_t(rows)));
    }
  }
}
