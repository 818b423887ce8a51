#include "gpu/formats/tensor.hpp"

#include <cassert>

namespace pensieve::model {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::q8_0: return "Q8_0";
    case DType::q4_0: return "Q4_0";
    case DType::q4_k: return "Q4_K";
    case DType::q4_1: return "Q4_1";
    case DType::q5_0: return "Q5_0";
    case DType::q5_1: return "Q5_1";
    case DType::q2_k: return "Q2_K";
    case DType::q3_k: return "Q3_K";
    case DType::q5_k: return "Q5_K";
    case DType::q6_k: return "Q6_K";
    case DType::iq4_nl: return "IQ4_NL";
    case DType::iq4_xs: return "IQ4_XS";
  }
  return "?";
}

std::int64_t dtype_block_elems(DType t) {
  switch (t) {
    case DType::q8_0:
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::iq4_nl: return 32;
    case DType::q2_k:
    case DType::q3_k:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k:
    case DType::iq4_xs: return 256;
    case DType::f32:
    case DType::f16:
    case DType::bf16: return 1;
  }
  return 1;
}

std::size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::q8_0: return 34;   // f16 scale + 32 x int8
    case DType::q4_0: return 18;   // f16 scale + 16 bytes of nibbles
    case DType::q4_k: return 144;  // f16 d, f16 dmin, 12 bytes scales, 128 bytes nibbles
    case DType::q4_1: return 20;   // f16 d, f16 m, 16 bytes of nibbles
    case DType::q5_0: return 22;   // f16 d, 4 bytes of fifth bits, 16 bytes of nibbles
    case DType::q5_1: return 24;   // f16 d, f16 m, 4 bytes of fifth bits, 16 bytes of nibbles
    case DType::q2_k: return 84;   // 16 bytes scales/mins, 64 bytes of 2-bit quants, f16 d, f16 dmin
    case DType::q3_k: return 110;  // 32 bytes high bits, 64 bytes low 2 bits, 12 bytes scales, f16 d
    case DType::q5_k: return 176;  // f16 d, f16 dmin, 12 bytes scales, 32 bytes fifth bits, 128 nibbles
    case DType::q6_k: return 210;  // 128 bytes low 4 bits, 64 bytes high 2 bits, 16 int8 scales, f16 d
    case DType::iq4_nl: return 18; // f16 d, 16 bytes of nibbles indexing a 16-entry table
    case DType::iq4_xs: return 136; // f16 d, u16 high scale bits, 4 bytes low scale bits, 128 nibbles
  }
  return 0;
}

std::size_t dtype_row_bytes(DType t, std::int64_t n) {
  const std::int64_t block = dtype_block_elems(t);
  assert(n % block == 0 && "row length must be a whole number of blocks");
  return std::size_t(n / block) * dtype_block_bytes(t);
}

std::int64_t Tensor::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return shape.empty() ? 0 : n;
}

}  // namespace pensieve::model
