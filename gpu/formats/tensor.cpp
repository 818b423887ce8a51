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
  }
  return "?";
}

std::int64_t dtype_block_elems(DType t) {
  switch (t) {
    case DType::q8_0:
    case DType::q4_0: return 32;
    case DType::q4_k: return 256;
    default: return 1;
  }
}

std::size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::q8_0: return 34;   // f16 scale + 32 x int8
    case DType::q4_0: return 18;   // f16 scale + 16 bytes of nibbles
    case DType::q4_k: return 144;  // f16 d, f16 dmin, 12 bytes scales, 128 bytes nibbles
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
