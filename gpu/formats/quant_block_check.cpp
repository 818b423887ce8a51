#include "gpu/formats/quant_block_check.hpp"

#include "gpu/formats/half.hpp"

#include <cstring>
#include <string>

namespace pensieve::model {

namespace {

// Byte offsets of a block's F16 fields (ggml-common.h's block layouts; at
// most two per block: d, and dmin or m).
struct F16Fields {
  std::size_t at[2];
  int count;
};

F16Fields f16_fields(DType t) {
  switch (t) {
    case DType::q8_0:
    case DType::q4_0:
    case DType::q5_0:
    case DType::iq4_nl:
      return {{0, 0}, 1};
    case DType::q4_1:
    case DType::q5_1:
    case DType::q4_k:
    case DType::q5_k:
      return {{0, 2}, 2};
    case DType::q2_k:
      return {{80, 82}, 2};
    case DType::q3_k:
      return {{108, 0}, 1};
    case DType::q6_k:
      return {{208, 0}, 1};
    case DType::f32:
    case DType::f16:
    case DType::bf16:
      break;
  }
  return {{0, 0}, 0};
}

bool finite_f16(const std::byte* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return (h & 0x7c00u) != 0x7c00u;  // exponent all ones: infinity or NaN
}

}  // namespace

Result<void> check_quant_blocks(const Tensor& t) {
  const F16Fields fields = f16_fields(t.dtype);
  // A missing tensor has no shape; one with a shape is checked even when
  // its data pointer is null (zero bytes: truncated).
  if (fields.count == 0 || t.shape.empty()) return {};
  const std::string what = "tensor " + t.name + " (" + dtype_name(t.dtype) + ")";
  const std::int64_t block = dtype_block_elems(t.dtype), cols = t.cols();
  if (cols % block != 0) {
    return fail(what + ": a row of " + std::to_string(cols) +
                " elements is not a whole number of " + std::to_string(block) + "-element blocks");
  }
  const std::size_t bb = dtype_block_bytes(t.dtype);
  const std::size_t n_blocks = std::size_t(t.numel() / block);
  if (t.size_bytes < n_blocks * bb) {
    return fail(what + ": " + std::to_string(t.size_bytes) + " bytes hold fewer than its " +
                std::to_string(n_blocks) + " blocks of " + std::to_string(bb) +
                " bytes (truncated)");
  }
  for (std::size_t b = 0; b < n_blocks; ++b) {
    for (int f = 0; f < fields.count; ++f) {
      if (!finite_f16(t.data + b * bb + fields.at[f])) {
        return fail(what + ": block " + std::to_string(b) + " has a non-finite " +
                    (f == 0 ? "scale" : "min") + " (infinity or NaN)");
      }
    }
  }
  return {};
}

}  // namespace pensieve::model
