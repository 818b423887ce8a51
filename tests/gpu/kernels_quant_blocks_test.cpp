// The block types beyond Q8_0/Q4_0/Q4_K: dequantize_row against scalar
// references written again from ggml's dequantize_row_* loop structure
// (pointer walks and shifting masks, not the element-index accessors of
// quant_blocks.hpp), and blocks with chosen fields giving the values their
// layout defines.
#include "gpu/kernels/cpu/dequant.hpp"
#include "tests/gpu/quant_test_blocks.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

namespace kc = pensieve::kernels::cpu;
using pensieve::model::DType;

namespace {

float f16(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return pensieve::f16_to_f32(h);
}

std::vector<float> ref_q2_k(const std::uint8_t* x, std::int64_t nb) {
  std::vector<float> y;
  for (std::int64_t i = 0; i < nb; ++i, x += 84) {
    const float d = f16(x + 80), min = f16(x + 82);
    const std::uint8_t* q = x + 16;
    int is = 0;
    for (int n = 0; n < 256; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const std::uint8_t sc = x[is++];
          const float dl = d * float(sc & 0xF), ml = min * float(sc >> 4);
          for (int l = 0; l < 16; ++l)
            y.push_back(dl * float((q[l + 16 * half] >> shift) & 3) - ml);
        }
      }
    }
  }
  return y;
}

std::vector<float> ref_q3_k(const std::uint8_t* x, std::int64_t nb) {
  std::vector<float> y;
  for (std::int64_t i = 0; i < nb; ++i, x += 110) {
    const float d_all = f16(x + 108);
    // The 12 scale bytes unpacked to 16 six-bit values as ggml's kmask dance does.
    std::uint32_t aux[4];
    std::memcpy(aux, x + 96, 12);
    const std::uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & 0x0f0f0f0f) | (((tmp >> 4) & 0x03030303) << 4);
    aux[3] = ((aux[1] >> 4) & 0x0f0f0f0f) | (((tmp >> 6) & 0x03030303) << 4);
    aux[0] = (aux[0] & 0x0f0f0f0f) | (((tmp >> 0) & 0x03030303) << 4);
    aux[1] = (aux[1] & 0x0f0f0f0f) | (((tmp >> 2) & 0x03030303) << 4);
    std::int8_t scales[16];
    std::memcpy(scales, aux, 16);
    const std::uint8_t* q = x + 32;
    const std::uint8_t* hm = x;
    std::uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < 256; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = std::uint8_t(m << 1)) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * float(scales[is++] - 32);
          for (int l = 16 * half; l < 16 * half + 16; ++l)
            y.push_back(dl * float(int((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4)));
        }
      }
    }
  }
  return y;
}

std::vector<float> ref_q5_k(const std::uint8_t* x, std::int64_t nb) {
  std::vector<float> y;
  for (std::int64_t i = 0; i < nb; ++i, x += 176) {
    const float d = f16(x), min = f16(x + 2);
    const std::uint8_t* ql = x + 48;
    const std::uint8_t* qh = x + 16;
    std::uint8_t u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32) {
      int sc, m;
      pensieve::testing::reference_scale_min(is, x + 4, sc, m);
      const float d1 = d * float(sc), m1 = min * float(m);
      pensieve::testing::reference_scale_min(is + 1, x + 4, sc, m);
      const float d2 = d * float(sc), m2 = min * float(m);
      for (int l = 0; l < 32; ++l)
        y.push_back(d1 * float((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1);
      for (int l = 0; l < 32; ++l)
        y.push_back(d2 * float((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2);
      u1 = std::uint8_t(u1 << 2);
      u2 = std::uint8_t(u2 << 2);
    }
  }
  return y;
}

std::vector<float> ref_q6_k(const std::uint8_t* x, std::int64_t nb) {
  std::vector<float> y(std::size_t(nb * 256));
  float* out = y.data();
  for (std::int64_t i = 0; i < nb; ++i, x += 210) {
    const float d = f16(x + 208);
    const std::uint8_t* ql = x;
    const std::uint8_t* qh = x + 128;
    const auto* sc = reinterpret_cast<const std::int8_t*>(x + 192);
    for (int n = 0; n < 256; n += 128, out += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        out[l] = d * float(sc[is + 0]) * float(q1);
        out[l + 32] = d * float(sc[is + 2]) * float(q2);
        out[l + 64] = d * float(sc[is + 4]) * float(q3);
        out[l + 96] = d * float(sc[is + 6]) * float(q4);
      }
    }
  }
  return y;
}

// Legacy blocks: ggml's loops over j < 16 with the qh word shifted per element.
std::vector<float> ref_legacy(DType t, const std::uint8_t* x, std::int64_t nb) {
  const auto& iq4nl = pensieve::testing::iq4nl_grid_reference;
  const std::size_t bb = pensieve::model::dtype_block_bytes(t);
  std::vector<float> y(std::size_t(nb * 32));
  for (std::int64_t i = 0; i < nb; ++i, x += bb) {
    const float d = f16(x);
    const bool has_min = t == DType::q4_1 || t == DType::q5_1;
    const float m = has_min ? f16(x + 2) : 0.0f;
    const bool five = t == DType::q5_0 || t == DType::q5_1;
    std::uint32_t qh = 0;
    if (five) std::memcpy(&qh, x + (has_min ? 4 : 2), 4);
    const std::uint8_t* qs = x + (has_min ? 4 : 2) + (five ? 4 : 0);
    for (int j = 0; j < 16; ++j) {
      const std::uint32_t xh0 = ((qh >> (j + 0)) << 4) & 0x10, xh1 = ((qh >> (j + 12))) & 0x10;
      const int lo = int((qs[j] & 0x0F) | xh0), hi = int((qs[j] >> 4) | xh1);
      float* o = y.data() + i * 32;
      switch (t) {
        case DType::q4_1:
          o[j] = float(lo) * d + m, o[j + 16] = float(hi) * d + m;
          break;
        case DType::q5_0:
          o[j] = float(lo - 16) * d, o[j + 16] = float(hi - 16) * d;
          break;
        case DType::q5_1:
          o[j] = float(lo) * d + m, o[j + 16] = float(hi) * d + m;
          break;
        default:
          o[j] = d * float(iq4nl[lo]), o[j + 16] = d * float(iq4nl[hi]);
          break;
      }
    }
  }
  return y;
}

// ggml's dequantize_row_iq4_xs: per sub-block of 32 the 6-bit scale from a
// nibble of scales_l and two bits of scales_h, d * (ls - 32), then the grid.
std::vector<float> ref_iq4_xs(const std::uint8_t* x, std::int64_t nb) {
  const auto& grid = pensieve::testing::iq4nl_grid_reference;
  std::vector<float> y;
  for (std::int64_t i = 0; i < nb; ++i, x += 136) {
    const float d = f16(x);
    const int scales_h = x[2] | (x[3] << 8);
    const std::uint8_t* scales_l = x + 4;
    const std::uint8_t* qs = x + 8;
    for (int ib = 0; ib < 8; ++ib, qs += 16) {
      const int ls = ((scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((scales_h >> 2 * ib) & 3) << 4);
      const float dl = d * float(ls - 32);
      float out[32];
      for (int j = 0; j < 16; ++j) {
        out[j] = dl * float(grid[qs[j] & 0xf]);
        out[j + 16] = dl * float(grid[qs[j] >> 4]);
      }
      y.insert(y.end(), out, out + 32);
    }
  }
  return y;
}

std::vector<float> reference(DType t, const std::vector<std::byte>& bytes, std::int64_t nb) {
  const auto* x = reinterpret_cast<const std::uint8_t*>(bytes.data());
  switch (t) {
    case DType::q2_k:
      return ref_q2_k(x, nb);
    case DType::q3_k:
      return ref_q3_k(x, nb);
    case DType::q5_k:
      return ref_q5_k(x, nb);
    case DType::q6_k:
      return ref_q6_k(x, nb);
    case DType::iq4_xs:
      return ref_iq4_xs(x, nb);
    default:
      return ref_legacy(t, x, nb);
  }
}

}  // namespace

TEST_CASE("rows of every new block type dequantise exactly as ggml's reference loops",
          "[kernels][quant]") {
  for (DType t : {DType::q4_1, DType::q5_0, DType::q5_1, DType::iq4_nl, DType::q2_k, DType::q3_k,
                  DType::q5_k, DType::q6_k, DType::iq4_xs}) {
    INFO(pensieve::model::dtype_name(t));
    const std::int64_t nb = 5;
    const auto bytes = pensieve::testing::random_blocks(t, nb, 31 + unsigned(t));
    const std::int64_t n = nb * pensieve::model::dtype_block_elems(t);
    std::vector<float> got(static_cast<std::size_t>(n));
    kc::dequantize_row(t, bytes.data(), n, got.data());
    const auto want = reference(t, bytes, nb);
    REQUIRE(want.size() == got.size());
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("a q6_k block with chosen fields gives the values its layout defines",
          "[kernels][quant]") {
  std::vector<std::byte> blk(210, std::byte{0});
  const std::uint16_t half = pensieve::f32_to_f16(0.5f);
  std::memcpy(blk.data() + 208, &half, 2);
  blk[192 + 0] = std::byte(4);      // sub-block 0 (elements 0..15): scale 4
  blk[192 + 11] = std::byte(0xfd);  // sub-block 11 (elements 176..191): scale -3
  blk[0] = std::byte(0x0a);         // element 0: low 4 bits 10 ...
  blk[128] = std::byte(0x02);       // ... high 2 bits 2: q = 42 - 32 = 10
  blk[64 + 32 + 16] =
      std::byte(0x50);  // element 128 + 32 * 3 + 16 = 240 (sub-block 15): low bits 5
  blk[128 + 32 + 16] = std::byte(0xc0);  // its high bits (bits 6-7 of qh[32 + 16]): 3, q = 53 - 32
  blk[192 + 15] = std::byte(2);
  blk[64 + 16 + 32 * 0] =
      std::byte(0x01);  // element 128 + 16 = 144 (sub-block 9, scale 0): not seen
  std::vector<float> y(256);
  kc::dequantize_row(DType::q6_k, blk.data(), 256, y.data());
  CHECK(y[0] == 0.5f * 4.0f * 10.0f);
  CHECK(y[1] == 0.5f * 4.0f * -32.0f);  // q 0 reads as -32
  CHECK(y[176] == 0.5f * -3.0f * -32.0f);
  CHECK(y[240] == 0.5f * 2.0f * 21.0f);
  CHECK(y[144] == 0.0f);
}

TEST_CASE("an iq4_xs block with chosen fields gives the values its layout defines",
          "[kernels][quant]") {
  std::vector<std::byte> blk(136, std::byte{0});
  const std::uint16_t half = pensieve::f32_to_f16(0.5f);
  std::memcpy(blk.data(), &half, 2);
  // Sub-block 0: ls = 0x21 (low nibble 1, high bits 2) -> scale 1; sub-block
  // 1: ls = 0 -> -32; sub-block 7: ls = 0x3f (low 0xf, high 3) -> 31.
  const std::uint16_t scales_h = 2u | (3u << 14);
  std::memcpy(blk.data() + 2, &scales_h, 2);
  blk[4] = std::byte(0x01);           // scales_l[0]: sub-block 0's low nibble 1, sub-block 1's 0
  blk[7] = std::byte(0xf0);           // scales_l[3]: sub-block 7's low nibble 0xf, sub-block 6's 0
  blk[8 + 0] = std::byte(0xf3);       // element 0: grid[3] = -65; element 16: grid[15] = 113
  blk[8 + 16 + 5] = std::byte(0x08);  // element 32 + 5: grid[8] = 1; element 53: grid[0]
  blk[8 + 112 + 15] = std::byte(0x90);  // element 224 + 15: grid[0]; element 255: grid[9] = 13
  std::vector<float> y(256);
  kc::dequantize_row(DType::iq4_xs, blk.data(), 256, y.data());
  CHECK(y[0] == 0.5f * 1.0f * -65.0f);
  CHECK(y[16] == 0.5f * 1.0f * 113.0f);
  CHECK(y[1] == 0.5f * 1.0f * -127.0f);  // nibble 0 is grid[0]
  CHECK(y[37] == 0.5f * -32.0f * 1.0f);
  CHECK(y[53] == 0.5f * -32.0f * -127.0f);
  CHECK(y[239] == 0.5f * 31.0f * -127.0f);
  CHECK(y[255] == 0.5f * 31.0f * 13.0f);
  CHECK(y[64] == 0.5f * -32.0f * -127.0f);  // sub-block 2: ls 0
}

TEST_CASE("a q5_0 block takes each element's fifth bit from its own bit of qh",
          "[kernels][quant]") {
  std::vector<std::byte> blk(22, std::byte{0});
  const std::uint16_t one = pensieve::f32_to_f16(1.0f);
  std::memcpy(blk.data(), &one, 2);
  const std::uint32_t qh = (1u << 3) | (1u << 20);  // elements 3 and 20
  std::memcpy(blk.data() + 2, &qh, 4);
  blk[6 + 3] = std::byte(0x21);  // element 3: low nibble 1; element 19: high nibble 2
  blk[6 + 4] = std::byte(0x70);  // element 20: high nibble 7
  std::vector<float> y(32);
  kc::dequantize_row(DType::q5_0, blk.data(), 32, y.data());
  CHECK(y[3] == float((1 | 16) - 16));
  CHECK(y[19] == float(2 - 16));
  CHECK(y[20] == float((7 | 16) - 16));
  CHECK(y[0] == -16.0f);
}
