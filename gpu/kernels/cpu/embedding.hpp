#pragma once
// Token embedding lookup: one dequantised table row per token.
#include "gpu/kernels/cpu/views.hpp"

#include <span>

namespace pensieve::kernels::cpu {

// out row t = table row tokens[t] as F32. Token ids must be < table.rows
// (the forward pass validates them first).
void embedding_lookup(const WeightView& table, std::span<const std::int32_t> tokens, RowsView out);

}  // namespace pensieve::kernels::cpu
