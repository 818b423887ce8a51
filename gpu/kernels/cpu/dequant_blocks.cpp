#include "gpu/kernels/cpu/dequant_blocks.hpp"

#include "gpu/kernels/cpu/quant_blocks.hpp"

namespace pensieve::kernels::cpu {

namespace {

// Legacy blocks of 32: element j < 16 from the low nibble of byte j, j + 16
// from its high nibble; `value(q, j)` maps the integer quant to F32.
template <class Value>
void dequantize_legacy(const std::byte* row, std::int64_t n, std::size_t block_bytes_,
                       std::size_t qs_offset, float* out, const Value& value) {
  for (std::int64_t b = 0; b < n / 32; ++b) {
    const std::byte* blk = row + std::size_t(b) * block_bytes_;
    const std::uint8_t* qs = block_bytes(blk + qs_offset);
    for (int j = 0; j < 16; ++j) {
      out[b * 32 + j] = value(blk, qs[j] & 0xf, j);
      out[b * 32 + 16 + j] = value(blk, qs[j] >> 4, j + 16);
    }
  }
}

int fifth_bit(const std::byte* qh, int j) {
  return int((block_u32(qh) >> j) & 1u) << 4;
}

}  // namespace

void dequantize_q4_1(const std::byte* row, std::int64_t n, float* out) {
  dequantize_legacy(row, n, 20, 4, out, [](const std::byte* blk, int q, int) {
    return float(q) * block_f16(blk) + block_f16(blk + 2);
  });
}

void dequantize_q5_0(const std::byte* row, std::int64_t n, float* out) {
  dequantize_legacy(row, n, 22, 6, out, [](const std::byte* blk, int q, int j) {
    return float((q | fifth_bit(blk + 2, j)) - 16) * block_f16(blk);
  });
}

void dequantize_q5_1(const std::byte* row, std::int64_t n, float* out) {
  dequantize_legacy(row, n, 24, 8, out, [](const std::byte* blk, int q, int j) {
    return float(q | fifth_bit(blk + 4, j)) * block_f16(blk) + block_f16(blk + 2);
  });
}

void dequantize_iq4_nl(const std::byte* row, std::int64_t n, float* out) {
  dequantize_legacy(row, n, 18, 2, out, [](const std::byte* blk, int q, int) {
    return block_f16(blk) * float(iq4nl_values[q]);
  });
}

// The K-quants: (d * scale) * q - (dmin * min) per sub-block, as ggml.
void dequantize_q2_k(const std::byte* row, std::int64_t n, float* out) {
  for (std::int64_t b = 0; b < n / 256; ++b) {
    const std::byte* blk = row + std::size_t(b) * 84;
    const float d = block_f16(blk + 80), dmin = block_f16(blk + 82);
    const std::uint8_t* scales = block_bytes(blk);
    for (int i = 0; i < 256; ++i) {
      const int sc = scales[i / 16];
      out[b * 256 + i] = (d * float(sc & 0xf)) * float(q2_k_quant(blk, i)) - dmin * float(sc >> 4);
    }
  }
}

void dequantize_q3_k(const std::byte* row, std::int64_t n, float* out) {
  for (std::int64_t b = 0; b < n / 256; ++b) {
    const std::byte* blk = row + std::size_t(b) * 110;
    const float d = block_f16(blk + 108);
    const std::uint8_t* scales = block_bytes(blk + 96);
    for (int i = 0; i < 256; ++i) {
      out[b * 256 + i] = (d * float(q3_k_scale(scales, i / 16))) * float(q3_k_quant(blk, i));
    }
  }
}

void dequantize_q5_k(const std::byte* row, std::int64_t n, float* out) {
  for (std::int64_t b = 0; b < n / 256; ++b) {
    const std::byte* blk = row + std::size_t(b) * 176;
    const float d = block_f16(blk), dmin = block_f16(blk + 2);
    for (int j = 0; j < 8; ++j) {
      const KScaleMin s = k_scale_min(block_bytes(blk + 4), j);
      const float d1 = d * float(s.scale), m1 = dmin * float(s.min);
      for (int l = 0; l < 32; ++l)
        out[b * 256 + j * 32 + l] = d1 * float(q5_k_quant(blk, j * 32 + l)) - m1;
    }
  }
}

void dequantize_q6_k(const std::byte* row, std::int64_t n, float* out) {
  for (std::int64_t b = 0; b < n / 256; ++b) {
    const std::byte* blk = row + std::size_t(b) * 210;
    const float d = block_f16(blk + 208);
    const auto* scales = reinterpret_cast<const std::int8_t*>(blk + 192);
    for (int i = 0; i < 256; ++i) {
      out[b * 256 + i] = d * float(scales[i / 16]) * float(q6_k_quant(blk, i));
    }
  }
}

// d * (s_j - 32) per sub-block of 32, then times the grid value, as ggml.
void dequantize_iq4_xs(const std::byte* row, std::int64_t n, float* out) {
  for (std::int64_t b = 0; b < n / 256; ++b) {
    const std::byte* blk = row + std::size_t(b) * 136;
    const float d = block_f16(blk);
    for (int j = 0; j < 8; ++j) {
      const float dl = d * float(iq4_xs_scale(blk, j));
      for (int l = 0; l < 32; ++l)
        out[b * 256 + j * 32 + l] = dl * float(iq4_xs_value(blk, j * 32 + l));
    }
  }
}

}  // namespace pensieve::kernels::cpu
