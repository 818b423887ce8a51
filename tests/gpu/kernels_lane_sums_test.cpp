// Several horizontal sums at once (lane_sums.hpp) against one hsum16 per
// vector: the batched GEMM tile and attention's score loop rely on the two
// giving the same bits.
#include "gpu/kernels/cpu/dot_tile.hpp"
#include "gpu/kernels/cpu/lane_sums.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#if defined(__AVX512F__) && defined(PENSIEVE_DOT_AVX512)

using namespace pensieve::kernels::cpu;

namespace {

// Values over many magnitudes, so that another summation order would round
// differently (checked below, or the comparison would prove nothing).
float spread_value(std::mt19937& rng) {
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  return std::ldexp(mantissa(rng), exponent(rng));
}

template <int N>
void check_against_one_at_a_time(std::uint32_t seed) {
  std::mt19937 rng(seed);
  int order_mattered = 0;
  for (int trial = 0; trial < 200; ++trial) {
    alignas(64) float lanes[N][16];
    __m512 v[N];
    for (int i = 0; i < N; ++i) {
      for (float& x : lanes[i]) x = spread_value(rng);
      v[i] = _mm512_load_ps(lanes[i]);
    }
    alignas(64) float got[16];
    _mm512_store_ps(got, hsum16_many<N>(v));
    for (int i = 0; i < N; ++i) {
      const float want = hsum16(v[i]);
      INFO("trial " << trial << ", vector " << i);
      REQUIRE(std::memcmp(&got[i], &want, sizeof want) == 0);
      float sequential = 0.0f;
      for (float x : lanes[i]) sequential += x;
      order_mattered += sequential != want;
    }
  }
  CHECK(order_mattered > 0);
}

}  // namespace

TEST_CASE("sixteen horizontal sums at once give the bits of one hsum16 each", "[kernels]") {
  check_against_one_at_a_time<16>(5);
}

TEST_CASE("eight horizontal sums at once give the bits of one hsum16 each", "[kernels]") {
  check_against_one_at_a_time<8>(6);
}

TEST_CASE("batched horizontal sums keep infinities and NaNs where one at a time does", "[kernels]") {
  alignas(64) float lanes[16][16] = {};
  for (int i = 0; i < 16; ++i)
    for (int l = 0; l < 16; ++l) lanes[i][l] = float(i * 16 + l);
  lanes[3][5] = INFINITY;
  lanes[7][0] = -INFINITY;
  lanes[9][2] = INFINITY;
  lanes[9][10] = -INFINITY;  // inf + -inf: NaN
  lanes[12][15] = NAN;
  __m512 v[16];
  for (int i = 0; i < 16; ++i) v[i] = _mm512_load_ps(lanes[i]);
  alignas(64) float got[16];
  _mm512_store_ps(got, hsum16_many<16>(v));
  for (int i = 0; i < 16; ++i) {
    const float want = hsum16(v[i]);
    INFO("vector " << i);
    if (std::isnan(want)) {
      CHECK(std::isnan(got[i]));
    } else {
      CHECK(got[i] == want);
    }
  }
  CHECK(got[3] == INFINITY);
  CHECK(std::isnan(got[9]));
}

#endif  // without AVX-512 there is no batched path to compare
