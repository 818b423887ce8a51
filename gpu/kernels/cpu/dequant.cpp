#include "gpu/kernels/cpu/dequant.hpp"

#include "gpu/formats/half.hpp"
#include "gpu/kernels/cpu/dequant_blocks.hpp"

#include <cassert>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace pensieve::kernels::cpu {

using model::DType;

WeightView weight_view(const model::Tensor& t) {
  WeightView v;
  v.dtype = t.dtype;
  v.data = t.data;
  v.cols = t.cols();
  v.rows = t.rows();
  v.row_bytes = model::dtype_row_bytes(t.dtype, v.cols);
  return v;
}

namespace {
std::uint16_t load_u16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Q4_K (ggml's block_q4_K): 256 elements in 144 bytes = f16 d, f16 dmin,
// 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32, then 128 bytes
// of nibbles: bytes 32g..32g+31 hold sub-block 2g in their low nibbles and
// 2g+1 in their high ones. Element value: (d * scale) * q - (dmin * min),
// each product rounded to F32 (no fused multiply-add).
void dequantize_q4_k(const std::byte* row, std::int64_t n, float* out) {
  for (std::int64_t b = 0; b < n / 256; ++b) {
    const std::byte* blk = row + b * 144;
    const float d = f16_to_f32(load_u16(blk)), dmin = f16_to_f32(load_u16(blk + 2));
    const auto* scales = reinterpret_cast<const std::uint8_t*>(blk + 4);
    const auto* qs = reinterpret_cast<const std::uint8_t*>(blk + 16);
    for (int j = 0; j < 8; ++j) {
      const Q4KScale s = q4_k_scale(scales, j);
      const float d1 = d * float(s.scale), m1 = dmin * float(s.min);
      const std::uint8_t* q = qs + 32 * (j / 2);
      for (int l = 0; l < 32; ++l) {
        const int nibble = (j & 1) ? (q[l] >> 4) : (q[l] & 0xf);
        out[b * 256 + j * 32 + l] = d1 * float(nibble) - m1;
      }
    }
  }
}
}  // namespace

Q4KScale q4_k_scale(const std::uint8_t* scales, int j) {
  if (j < 4) return {std::uint8_t(scales[j] & 63), std::uint8_t(scales[j + 4] & 63)};
  return {std::uint8_t((scales[j + 4] & 0xf) | ((scales[j - 4] >> 6) << 4)),
          std::uint8_t((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4))};
}

void dequantize_row(DType t, const std::byte* row, std::int64_t n, float* out) {
  switch (t) {
    case DType::f32: std::memcpy(out, row, std::size_t(n) * 4); return;
    case DType::f16:
      for (std::int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(load_u16(row + 2 * i));
      return;
    case DType::bf16:
      for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(load_u16(row + 2 * i));
      return;
    case DType::q8_0:
      for (std::int64_t b = 0; b < n / 32; ++b) {
        const std::byte* blk = row + b * 34;
        const float d = f16_to_f32(load_u16(blk));
        for (int i = 0; i < 32; ++i) out[b * 32 + i] = float(std::int8_t(blk[2 + i])) * d;
      }
      return;
    case DType::q4_0:
      for (std::int64_t b = 0; b < n / 32; ++b) {
        const std::byte* blk = row + b * 18;
        const float d = f16_to_f32(load_u16(blk));
        for (int i = 0; i < 16; ++i) {
          const int q = std::to_integer<int>(blk[2 + i]);
          out[b * 32 + i] = float((q & 0xf) - 8) * d;
          out[b * 32 + 16 + i] = float((q >> 4) - 8) * d;
        }
      }
      return;
    case DType::q4_k: dequantize_q4_k(row, n, out); return;
    case DType::q4_1: dequantize_q4_1(row, n, out); return;
    case DType::q5_0: dequantize_q5_0(row, n, out); return;
    case DType::q5_1: dequantize_q5_1(row, n, out); return;
    case DType::iq4_nl: dequantize_iq4_nl(row, n, out); return;
    case DType::iq4_xs: dequantize_iq4_xs(row, n, out); return;
    case DType::q2_k: dequantize_q2_k(row, n, out); return;
    case DType::q3_k: dequantize_q3_k(row, n, out); return;
    case DType::q5_k: dequantize_q5_k(row, n, out); return;
    case DType::q6_k: dequantize_q6_k(row, n, out); return;
  }
  assert(false && "dequantize_row: unsupported dtype");
}

std::vector<float> dequantize(const model::Tensor& t) {
  std::vector<float> out(std::size_t(t.numel()));
  const WeightView v = weight_view(t);
  for (std::int64_t r = 0; r < v.rows; ++r) dequantize_row(t.dtype, v.row(r), v.cols, out.data() + r * v.cols);
  return out;
}

void round_to_f16(float* x, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm512_storeu_ps(x + i, _mm512_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) x[i] = f16_to_f32(f32_to_f16(x[i]));
}

}  // namespace pensieve::kernels::cpu
