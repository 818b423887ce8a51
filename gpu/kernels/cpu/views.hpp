#pragma once
// Non-owning views the CPU kernels take: activation rows (F32, row-major with
// a stride) and weight matrices in their stored type. Shapes follow
// model::Tensor: a weight is {out_features rows, in_features cols}.
#include "gpu/formats/tensor.hpp"

#include <cstddef>
#include <cstdint>

namespace pensieve::kernels::cpu {

// rows x cols floats; row r starts at data + r * stride.
struct RowsView {
  float* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t stride = 0;
  float* row(std::int64_t r) const { return data + r * stride; }
};

struct ConstRowsView {
  const float* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t stride = 0;
  ConstRowsView() = default;
  ConstRowsView(const float* d, std::int64_t r, std::int64_t c, std::int64_t s)
      : data(d), rows(r), cols(c), stride(s) {}
  ConstRowsView(const RowsView& v)  // NOLINT: a mutable view reads as a const one
      : data(v.data), rows(v.rows), cols(v.cols), stride(v.stride) {}
  const float* row(std::int64_t r) const { return data + r * stride; }
};

// A weight matrix as stored: `rows` rows of `cols` elements, each row
// `row_bytes` long (quantised types: whole blocks of 32).
struct WeightView {
  model::DType dtype = model::DType::f32;
  const std::byte* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::size_t row_bytes = 0;
  const std::byte* row(std::int64_t r) const { return data + std::size_t(r) * row_bytes; }
};

// The view of a loaded 2-D tensor (1-D tensors read as one row).
WeightView weight_view(const model::Tensor& t);

}  // namespace pensieve::kernels::cpu
