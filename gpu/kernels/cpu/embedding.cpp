#include "gpu/kernels/cpu/embedding.hpp"

#include "gpu/kernels/cpu/dequant.hpp"

#include <cassert>

namespace pensieve::kernels::cpu {

void embedding_lookup(const WeightView& table, std::span<const std::int32_t> tokens, RowsView out) {
  assert(std::int64_t(tokens.size()) == out.rows && out.cols == table.cols);
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    assert(tokens[t] >= 0 && tokens[t] < table.rows);
    dequantize_row(table.dtype, table.row(tokens[t]), table.cols, out.row(std::int64_t(t)));
  }
}

}  // namespace pensieve::kernels::cpu
