// FP8 KV: the block layout (an F32 scale amax/448, then 32 E4M3 codes along
// each token's row), the quantisation error of reshape_and_cache, poisoning
// and the pool's byte sizes.
#include "gpu/kernels/cpu/reshape_and_cache.hpp"
#include "gpu/kv/fp8_e4m3.hpp"
#include "gpu/kv/fp8_kv_row.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "tests/gpu/kv_test_pool.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace pensieve;

namespace {

kv::KvPoolConfig fp8_config(std::int32_t n_kv_heads, std::int32_t head_dim) {
  return testing::small_kv_config(kv::KvDType::fp8, n_kv_heads, head_dim);
}

float block_scale(const std::byte* blk) {
  float s = 0.0f;
  std::memcpy(&s, blk, sizeof s);
  return s;
}

}  // namespace

TEST_CASE("an FP8 KV row is an F32 scale amax/448 then 32 E4M3 codes of x / scale", "[kv][fp8]") {
  // amax 448 makes the scale exactly 1 and each code e4m3(x).
  std::vector<float> x(64, 0.0f);
  x[0] = -448.0f, x[1] = 1.0625f, x[2] = 3.3f, x[31] = 0.001f;
  // The second block: amax 2, scale 2/448.
  x[32] = 2.0f, x[33] = -1.0f, x[40] = 0.01f;
  std::vector<std::byte> out(2 * kv::kFp8KvBlockBytes, std::byte{0xAA});
  kv::quantize_kv_row_fp8(x.data(), 64, out.data());
  CHECK(block_scale(out.data()) == 1.0f);
  CHECK(block_scale(out.data() + 36) == 2.0f / 448.0f);
  const auto* c0 = reinterpret_cast<const std::uint8_t*>(out.data() + 4);
  const auto* c1 = reinterpret_cast<const std::uint8_t*>(out.data() + 40);
  CHECK(c0[0] == 0xFE);  // -448
  CHECK(c0[1] == 0x38);  // 1.0625: halfway between 1 and 1.125, to the even 1
  CHECK(c0[2] == kv::float_to_fp8_e4m3(3.3f));
  CHECK(c0[3] == 0x00);
  CHECK(c0[31] == kv::float_to_fp8_e4m3(0.001f));  // a subnormal code
  CHECK(c0[31] != 0);
  CHECK(c1[0] == 0x7E);  // the block's largest value is the largest code
  CHECK(c1[1] == kv::float_to_fp8_e4m3(-1.0f / (2.0f / 448.0f)));
  CHECK(c1[8] == kv::float_to_fp8_e4m3(0.01f / (2.0f / 448.0f)));
  std::vector<float> back(64);
  kv::widen_kv_row_fp8(out.data(), 0, 64, back.data());
  CHECK(back[0] == -448.0f);
  CHECK(back[1] == 1.0f);
  CHECK(back[32] == 2.0f);
  CHECK(back[33] == kv::fp8_e4m3_to_float(c1[1]) * (2.0f / 448.0f));
  // A window that starts inside a block and crosses into the next.
  std::vector<float> window(10);
  kv::widen_kv_row_fp8(out.data(), 28, 10, window.data());
  for (int i = 0; i < 10; ++i) CHECK(window[std::size_t(i)] == back[std::size_t(28 + i)]);
}

TEST_CASE("an all-zero FP8 block has scale 1 and reads back as zeros", "[kv][fp8]") {
  std::vector<float> x(32, 0.0f);
  std::vector<std::byte> out(kv::kFp8KvBlockBytes, std::byte{0xAA});
  kv::quantize_kv_row_fp8(x.data(), 32, out.data());
  CHECK(block_scale(out.data()) == 1.0f);
  std::vector<float> back(32, 7.0f);
  kv::widen_kv_row_fp8(out.data(), 0, 32, back.data());
  for (float v : back) CHECK(v == 0.0f);
}

TEST_CASE("an FP8 pool counts 36 bytes per 32 values and refuses rows that are not whole blocks", "[kv][fp8]") {
  const kv::KvPoolConfig c = fp8_config(2, 64);
  kv::KvPool pool(c);
  const kv::PagedKvView v = pool.layer(0);
  CHECK(v.token_bytes() == 4 * 36);
  CHECK(v.block_bytes() == 2 * 8 * 4 * 36);
  CHECK(pool.layer_bytes() == 4 * v.block_bytes());
  CHECK(kv::kv_bytes_per_token(c) == 3 * 2 * 4 * 36);
  CHECK(kv::kv_dtype_from_name("fp8") == kv::KvDType::fp8);
  CHECK(std::string(kv::kv_dtype_name(kv::KvDType::fp8)) == "fp8");
  CHECK_THROWS_AS(kv::KvPool(fp8_config(1, 16)), std::invalid_argument);
}

TEST_CASE("reshape_and_cache into an FP8 pool reads back within half an E4M3 step of the F32 values",
          "[kv][fp8]") {
  for (const auto& [heads, dim] : {std::pair{2, 16}, std::pair{1, 64}, std::pair{2, 128}}) {
    kv::KvPool pool(fp8_config(heads, dim));
    const std::int64_t row = std::int64_t(heads) * dim;
    std::mt19937_64 rng(std::uint64_t(heads * 1000 + dim));
    const auto k = testing::normal_values(rng, std::size_t(8 * row), 3.0f),
               v = testing::normal_values(rng, std::size_t(8 * row), 0.2f);
    std::vector<std::int64_t> slots{9, 3, 17, 30, 0, -1, 31, 12};
    kernels::cpu::reshape_and_cache({k.data(), v.data(), kv::KvDType::f32, slots.data(), 8, pool.layer(1)});
    const kv::PagedKvView view = pool.layer(1);
    double worst = 0;  // error over the allowed error: at most 1
    std::vector<float> back(static_cast<std::size_t>(row));
    for (std::int32_t t = 0; t < 8; ++t) {
      if (slots[std::size_t(t)] < 0) continue;
      const auto block = std::int32_t(slots[std::size_t(t)] / 8), in_block = std::int32_t(slots[std::size_t(t)] % 8);
      for (int which = 0; which < 2; ++which) {
        const std::byte* r = static_cast<const std::byte*>(view.data) + view.row_byte_offset(block, which, in_block);
        kv::widen_kv_row_fp8(r, 0, std::int32_t(row), back.data());
        const float* src = (which == 0 ? k.data() : v.data()) + t * row;
        for (std::int64_t i = 0; i < row; ++i) {
          const float scale = block_scale(r + std::size_t(i / 32) * kv::kFp8KvBlockBytes);
          // Half a step: 2^-4 relative for normal codes, 2^-10 x scale below 2^-6 x scale.
          const double allowed = std::max(std::fabs(double(src[i])) / 16.0, std::ldexp(double(scale), -10));
          worst = std::max(worst, std::fabs(double(back[std::size_t(i)]) - double(src[i])) / allowed);
        }
      }
    }
    INFO("heads " << heads << " head_dim " << dim);
    CHECK(worst <= 1.0 + 1e-6);
    CHECK(worst > 0.5);  // the check sees real rounding
  }
}

TEST_CASE("a poisoned FP8 block reads back as NaN", "[kv][fp8]") {
  kv::KvPool pool(fp8_config(2, 16));
  testing::fill_first_block(pool, {2});
  pool.poison(kv::BlockId{0});
  std::vector<float> back(32);
  const kv::PagedKvView view = pool.layer(2);
  kv::widen_kv_row_fp8(static_cast<const std::byte*>(view.data) + view.row_byte_offset(0, 1, 7), 0, 32, back.data());
  for (float x : back) CHECK(std::isnan(x));
}
