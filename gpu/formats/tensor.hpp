#pragma once
// A non-owning view of one weight tensor as a loader found it. Shapes are in
// row-major (numpy) order: a matrix is {rows, cols} with each row contiguous,
// rows = output features, cols = input features, whatever the file format.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pensieve::model {

// The stored types, with ggml's block layouts for the quantised ones
// (ggml-common.h: block_q4_0 ... block_q6_K, block_iq4_nl, block_iq4_xs).
enum class DType : std::uint8_t {
  f32, f16, bf16, q8_0, q4_0, q4_k,
  q4_1, q5_0, q5_1, q2_k, q3_k, q5_k, q6_k, iq4_nl, iq4_xs,
};

// Every DType, for tests and tables that cover them all.
inline constexpr DType all_dtypes[] = {
    DType::f32,  DType::f16,  DType::bf16, DType::q8_0, DType::q4_0,   DType::q4_k, DType::q4_1,
    DType::q5_0, DType::q5_1, DType::q2_k, DType::q3_k, DType::q5_k, DType::q6_k, DType::iq4_nl,
    DType::iq4_xs,
};

const char* dtype_name(DType t);

// Elements per quantisation block (1 for plain floats) and bytes per block.
std::int64_t dtype_block_elems(DType t);
std::size_t dtype_block_bytes(DType t);

// Bytes of a row of `n` elements (n must be a multiple of the block size).
std::size_t dtype_row_bytes(DType t, std::int64_t n);

struct Tensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;  // row-major; empty for a missing tensor
  const std::byte* data = nullptr;  // owned by the ModelWeights' storage
  std::size_t size_bytes = 0;

  bool present() const { return data != nullptr; }
  std::int64_t rows() const { return shape.size() >= 2 ? shape[0] : 1; }
  std::int64_t cols() const { return shape.empty() ? 0 : shape.back(); }
  std::int64_t numel() const;
};

}  // namespace pensieve::model
