// FP8 E4M3 codes for the FP8 KV cache: every code decodes to the value of the
// format's definition, every finite code encodes back to itself, halfway
// values round to the even code, and out-of-range values saturate to 448.
#include "gpu/kv/fp8_e4m3.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>

using namespace pensieve;

TEST_CASE("E4M3 decodes every code as the format defines it and encodes every finite code back to itself",
          "[kv][fp8]") {
  int finite = 0;
  for (int c = 0; c < 256; ++c) {
    const auto code = std::uint8_t(c);
    const float v = kv::fp8_e4m3_to_float(code);
    INFO("code " << c);
    if ((c & 0x7F) == 0x7F) {
      CHECK(std::isnan(v));
      continue;
    }
    ++finite;
    const int e = (c >> 3) & 15, m = c & 7;
    const double expected = (c & 0x80 ? -1.0 : 1.0) * (e == 0 ? m / 8.0 * std::pow(2.0, -6) : (1 + m / 8.0) * std::pow(2.0, e - 7));
    CHECK(double(v) == expected);
    // -0 encodes as 0x80, +0 as 0x00: both round-trip.
    CHECK(kv::float_to_fp8_e4m3(v) == code);
  }
  CHECK(finite == 254);
  CHECK(kv::fp8_e4m3_to_float(0x7E) == 448.0f);
  CHECK(kv::fp8_e4m3_to_float(0x01) == std::ldexp(1.0f, -9));  // the smallest subnormal
}

TEST_CASE("E4M3 encoding rounds to the nearest code, ties to even, and saturates at 448", "[kv][fp8]") {
  // 1.0 = 0x38, the next code 1.125 = 0x39: halfway 1.0625 goes to the even 0x38.
  CHECK(kv::float_to_fp8_e4m3(1.0625f) == 0x38);
  CHECK(kv::float_to_fp8_e4m3(1.0626f) == 0x39);
  // 1.125 (0x39) .. 1.25 (0x3A): halfway 1.1875 goes to the even 0x3A.
  CHECK(kv::float_to_fp8_e4m3(1.1875f) == 0x3A);
  // Carry into the next binade: 1.9375 is halfway between 1.875 (0x3F) and 2.0 (0x40).
  CHECK(kv::float_to_fp8_e4m3(1.9375f) == 0x40);
  // Subnormals: quantum 2^-9; halfway between 0 and the smallest goes to 0.
  CHECK(kv::float_to_fp8_e4m3(std::ldexp(1.0f, -10)) == 0x00);
  CHECK(kv::float_to_fp8_e4m3(std::ldexp(3.0f, -10)) == 0x02);  // 1.5 quanta -> 2 (even)
  CHECK(kv::float_to_fp8_e4m3(-std::ldexp(1.0f, -9)) == 0x81);
  // Saturation, both signs, and NaN.
  CHECK(kv::float_to_fp8_e4m3(1e9f) == 0x7E);
  CHECK(kv::float_to_fp8_e4m3(-470.0f) == 0xFE);
  CHECK(kv::float_to_fp8_e4m3(INFINITY) == 0x7E);
  CHECK(kv::float_to_fp8_e4m3(NAN) == 0x7F);
  // Against a brute-force nearest search over random values.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mag(-10.0f, 9.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = (rng() & 1 ? -1.0f : 1.0f) * std::exp2(mag(rng));
    const std::uint8_t got = kv::float_to_fp8_e4m3(x);
    double best = INFINITY;
    for (int c = 0; c < 256; ++c) {
      if ((c & 0x7F) == 0x7F) continue;
      best = std::min(best, std::fabs(double(kv::fp8_e4m3_to_float(std::uint8_t(c))) - double(x)));
    }
    INFO("x " << x);
    CHECK(std::fabs(double(kv::fp8_e4m3_to_float(got)) - double(x)) == best);
  }
}

TEST_CASE("an E4M3 row scaled by amax/448 keeps every value within half a code step", "[kv][fp8]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::vector<float> row(128);
  for (auto& v : row) v = n(rng);
  float amax = 0;
  for (float v : row) amax = std::max(amax, std::fabs(v));
  const float scale = kv::fp8_e4m3_scale(amax);
  CHECK(kv::float_to_fp8_e4m3(amax / scale) == 0x7E);  // the largest lands on 448
  for (float v : row) {
    const float back = kv::fp8_e4m3_to_float(kv::float_to_fp8_e4m3(v / scale)) * scale;
    // Relative step of E4M3 is 2^-3: half of it for normals, an absolute floor for subnormals.
    CHECK(std::fabs(back - v) <= std::max(std::fabs(v) * 0.0625f, scale * std::ldexp(1.0f, -10)) * 1.0001f);
  }
  CHECK(kv::fp8_e4m3_scale(0.0f) == 1.0f);
}
