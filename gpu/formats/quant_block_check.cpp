#include "gpu/formats/quant_block_check.hpp"

#include "gpu/formats/half.hpp"

#include <cstring>
#include <string>

namespace pensieve::model {

namespace {

bool finite_f16(const std::byte* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return (h & 0x7c00u) != 0x7c00u;  // exponent all ones: infinity or NaN
}

}  // namespace

std::span<const std::size_t> quant_block_f16_fields(DType t) {
  static constexpr std::size_t at_0[] = {0}, at_0_2[] = {0, 2}, q2_k[] = {80, 82}, q3_k[] = {108},
                               q6_k[] = {208};
  switch (t) {
    case DType::q8_0:
    case DType::q4_0:
    case DType::q5_0:
    case DType::iq4_nl:
    case DType::iq4_xs:
      return at_0;
    case DType::q4_1:
    case DType::q5_1:
    case DType::q4_k:
    case DType::q5_k:
      return at_0_2;
    case DType::q2_k:
      return q2_k;
    case DType::q3_k:
      return q3_k;
    case DType::q6_k:
      return q6_k;
    case DType::f32:
    case DType::f16:
    case DType::bf16:
      break;
  }
  return {};
}

Result<void> check_quant_blocks(const Tensor& t) {
  const std::span<const std::size_t> fields = quant_block_f16_fields(t.dtype);
  // A missing tensor has no shape; one with a shape is checked even when
  // its data pointer is null (zero bytes: truncated).
  if (fields.empty() || t.shape.empty()) return {};
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
    for (std::size_t f = 0; f < fields.size(); ++f) {
      if (!finite_f16(t.data + b * bb + fields[f])) {
        return fail(what + ": block " + std::to_string(b) + " has a non-finite " +
                    (f == 0 ? "scale" : "min") + " (infinity or NaN)");
      }
    }
  }
  return {};
}

}  // namespace pensieve::model
