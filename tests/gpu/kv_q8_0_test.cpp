// Q8_0 KV: the block layout (64-value blocks of ggml's block_q8_0 arithmetic
// along each token's row, a last 32 values a block of their own), the
// quantisation error of reshape_and_cache, the dequantisers' agreement and
// the pool's byte sizes.
#include "gpu/formats/half.hpp"
#include "gpu/kernels/cpu/attention_widen_q8.hpp"
#include "gpu/kernels/cpu/reshape_and_cache.hpp"
#include "gpu/kernels/cpu/reshape_and_cache_q8.hpp"
#include "gpu/kv/disk_tier_file.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "tests/gpu/kv_test_pool.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace pensieve;
using namespace pensieve::kernels;

namespace {

kv::KvPoolConfig q8_config(std::int32_t n_kv_heads, std::int32_t head_dim, std::int32_t blocks = 4) {
  return testing::small_kv_config(kv::KvDType::q8_0, n_kv_heads, head_dim, blocks);
}

}  // namespace

TEST_CASE("a Q8_0 KV row is blocks of 64: the F16 scale amax/127, then 64 quants rounded to nearest even",
          "[kv][q8_0]") {
  // 96 values: a block of 64 (66 bytes), then the last 32 in a block of
  // their own (34 bytes). amax 127 makes the first d exactly 1 (F16 0x3c00)
  // and each of its quants round(x), past value 32 too.
  std::vector<float> x(96, 0.0f);
  x[0] = -127.0f, x[1] = 1.5f, x[2] = 2.5f, x[3] = -3.7f, x[31] = 100.2f, x[40] = 5.5f, x[63] = -0.5f;
  // The last block: amax 2, d = 2/127 rounded to F16.
  x[64] = 2.0f, x[65] = -1.0f, x[72] = 0.01f;
  REQUIRE(kv::kv_values_bytes(kv::KvDType::q8_0, 96) == 100);
  std::vector<std::byte> out(101, std::byte{0xAA});
  cpu::quantize_kv_row_q8_0(x.data(), 96, out.data());
  std::uint16_t d0 = 0, d1 = 0;
  std::memcpy(&d0, out.data(), 2);
  std::memcpy(&d1, out.data() + 66, 2);
  CHECK(d0 == 0x3c00);
  CHECK(d1 == f32_to_f16(2.0f / 127.0f));
  const auto* q0 = reinterpret_cast<const std::int8_t*>(out.data() + 2);
  const auto* q1 = reinterpret_cast<const std::int8_t*>(out.data() + 68);
  CHECK(q0[0] == -127);
  CHECK(q0[1] == 2);  // 1.5 to even
  CHECK(q0[2] == 2);  // 2.5 to even
  CHECK(q0[3] == -4);
  CHECK(q0[4] == 0);
  CHECK(q0[31] == 100);
  CHECK(q0[40] == 6);   // 5.5 to even, on the first block's scale
  CHECK(q0[63] == 0);   // -0.5 to even
  CHECK(q1[0] == 127);
  CHECK(q1[1] == -64);  // -1 * 127/2 = -63.5, to even
  CHECK(q1[8] == 1);    // 0.01 * 63.5 = 0.635
  CHECK(q1[2] == 0);
  CHECK(out[100] == std::byte{0xAA});  // nothing past the row
  // Read back from anywhere in the row: value i at (i / 64) * 66 + 2 + i % 64.
  std::vector<float> back(8);
  cpu::widen_q8_0_portable(out.data(), 60, 8, back.data());
  const float d1f = f16_to_f32(d1);
  CHECK(back == std::vector<float>{0, 0, 0, 0, 127 * d1f, -64 * d1f, 0, 0});
}

TEST_CASE("an all-zero Q8_0 block has scale 0 and reads back as zeros", "[kv][q8_0]") {
  std::vector<float> x(64, 0.0f), back(64, 1.0f);
  std::vector<std::byte> out(kv::kQ8KvBlockBytes, std::byte{0xAA});
  cpu::quantize_kv_row_q8_0(x.data(), 64, out.data());
  for (auto b : out) CHECK(b == std::byte{0});
  cpu::widen_q8_0_portable(out.data(), 0, 64, back.data());
  for (float v : back) CHECK(v == 0.0f);
}

TEST_CASE("the pool's byte sizes count 66 bytes per 64 values in every tier's layout", "[kv][q8_0]") {
  const kv::KvPoolConfig c = q8_config(2, 64);
  // 3 layers x K,V x 128 values -> 2 blocks of 66 bytes each.
  CHECK(kv::kv_bytes_per_token(c) == 3 * 2 * 2 * 66);
  kv::KvPool pool(c);
  CHECK(pool.layer_bytes() == std::size_t(4 * 2 * 8) * 2 * 66);
  CHECK(pool.layer(1).block_bytes() == std::size_t(2 * 8) * 2 * 66);
  CHECK(kv::disk_layout_of(c).layer_bytes == pool.layer(0).block_bytes());
  const auto layers = kv::chunk_layers(pool, kv::BlockId{2});
  REQUIRE(layers.size() == 3);
  CHECK(layers[1].size() == pool.layer(1).block_bytes());
  CHECK(layers[1].data() == static_cast<std::byte*>(pool.layer(1).data) + 2 * pool.layer(1).block_bytes());
  kv::KvPoolConfig f16 = c;
  f16.dtype = kv::KvDType::f16;
  CHECK(double(kv::kv_bytes_per_token(f16)) / double(kv::kv_bytes_per_token(c)) == Approx(64.0 / 33.0));
  // A row that is an odd multiple of 32 ends with a block of 32: 66 + 34.
  CHECK(kv::kv_bytes_per_token(q8_config(2, 48)) == 3 * 2 * 100);
  CHECK(kv::kv_bytes_per_token(q8_config(2, 16)) == 3 * 2 * 34);  // the tiny models' rows: as ggml's
  CHECK(kv::kv_values_bytes(kv::KvDType::fp8, 96) == 3 * 36);  // FP8 keeps blocks of 32
}

TEST_CASE("a Q8_0 pool refuses rows that are not whole multiples of 32 values", "[kv][q8_0]") {
  CHECK_THROWS_AS(kv::KvPool(q8_config(3, 8)), std::invalid_argument);
  CHECK_NOTHROW(kv::KvPool(q8_config(4, 8)));   // stories260K's row: 4 heads of 8
  CHECK_NOTHROW(kv::KvPool(q8_config(4, 40)));  // heads straddle blocks
  CHECK(kv::kv_dtype_from_name("q8_0") == kv::KvDType::q8_0);
  CHECK(kv::kv_dtype_from_name("f16") == kv::KvDType::f16);
  CHECK_FALSE(kv::kv_dtype_from_name("q8").has_value());
}

TEST_CASE("reshape_and_cache into a Q8_0 pool reads back within 0.57 of a quant step of the F32 values",
          "[kv][q8_0][reshape_and_cache]") {
  // Rounding to the nearest quant is half a step (d/2); the scale's F16
  // rounding adds at most 127 * 2^-11 steps (0.062): 0.562 in all.
  std::mt19937_64 rng(20261202);
  for (const auto& [heads, hd] : std::vector<std::pair<int, int>>{{1, 32}, {2, 64}, {4, 8}, {2, 16}, {4, 40}, {1, 128}, {2, 48}, {3, 32}}) {
    kv::KvPool pool(q8_config(heads, hd, 6));
    const std::int64_t row = std::int64_t(heads) * hd;
    const std::int32_t tokens = 11;
    const auto k = testing::normal_values(rng, std::size_t(tokens * row), 3.0f);
    const auto v = testing::normal_values(rng, std::size_t(tokens * row), 0.02f);
    std::vector<std::int64_t> slots;
    for (std::int32_t t = 0; t < tokens; ++t) slots.push_back(t == 4 ? -1 : (t * 5 + 3) % 48);
    const kv::PagedKvView view = pool.layer(2);
    cpu::reshape_and_cache({k.data(), v.data(), kv::KvDType::f32, slots.data(), tokens, view});
    const auto vector_path = cpu::widen_q8_0_avx512_fn();
    INFO("heads " << heads << " head_dim " << hd << " vector path " << cpu::widen_q8_0_path());
    double worst_steps = 0;
    for (std::int32_t t = 0; t < tokens; ++t) {
      if (slots[t] < 0) continue;
      for (int which = 0; which < 2; ++which) {
        const float* src = (which == 0 ? k.data() : v.data()) + t * row;
        const std::byte* stored = static_cast<const std::byte*>(view.data) +
                                  view.row_byte_offset(std::int32_t(slots[t] / 8), which, std::int32_t(slots[t] % 8));
        // Head by head, as the attention kernel reads it.
        for (std::int32_t h = 0; h < heads; ++h) {
          const auto n = static_cast<std::size_t>(hd);
          std::vector<float> back(n), fast(n);
          cpu::widen_q8_0_portable(stored, std::int64_t(h) * hd, hd, back.data());
          if (vector_path) {
            vector_path(stored, std::int64_t(h) * hd, hd, fast.data());
            REQUIRE(std::memcmp(back.data(), fast.data(), back.size() * sizeof(float)) == 0);
          }
          for (std::int32_t i = 0; i < hd; ++i) {
            // e's block: 64 values, or the row's last 32.
            const std::int64_t e = std::int64_t(h) * hd + i, b0 = e / 64 * 64, b1 = std::min(b0 + 64, row);
            float amax = 0;
            for (std::int64_t j = b0; j < b1; ++j) amax = std::max(amax, std::fabs(src[j]));
            const double step = double(amax) / 127.0;
            worst_steps = std::max(worst_steps, std::fabs(double(back[std::size_t(i)]) - src[e]) / step);
          }
        }
      }
    }
    CHECK(worst_steps <= 0.57);
    CHECK(worst_steps > 0.3);  // the check sees real rounding
  }
}

TEST_CASE("a poisoned Q8_0 block reads back as NaN and copy_prefix copies its bytes", "[kv][q8_0]") {
  kv::KvPool pool(q8_config(2, 16));
  testing::fill_first_block(pool, {0, 1, 2});
  pool.copy_prefix(kv::BlockId{0}, kv::BlockId{3}, 5);
  for (std::int32_t l = 0; l < 3; ++l) {
    const kv::PagedKvView view = pool.layer(l);
    const auto* base = static_cast<const std::byte*>(view.data);
    for (int which = 0; which < 2; ++which) {
      CHECK(std::memcmp(base + view.row_byte_offset(3, which, 0), base + view.row_byte_offset(0, which, 0),
                        5 * view.token_bytes()) == 0);
    }
  }
  pool.poison(kv::BlockId{0});
  std::vector<float> back(16);
  const kv::PagedKvView view = pool.layer(1);
  cpu::widen_q8_0_portable(static_cast<const std::byte*>(view.data) + view.row_byte_offset(0, 1, 7), 16, 16,
                           back.data());
  for (float x : back) CHECK(std::isnan(x));
}
