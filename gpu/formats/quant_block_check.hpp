#pragma once
// A stored quantised tensor checked block by block before any kernel reads
// it: the bytes hold whole rows of whole blocks, and every block's F16 scale
// and min fields are finite (the check of ggml's ggml_validate_row_data). A
// NaN or infinite scale would otherwise turn every logit it touches into
// NaN far from its cause; the Error names the tensor, its type and the block.
#include "gpu/formats/tensor.hpp"
#include "runtime/error.hpp"

#include <cstddef>
#include <span>

namespace pensieve::model {

// Byte offsets of a quantised block's F16 fields (ggml-common.h's block
// layouts): its scale d, then dmin or m where it has one. Empty for F32,
// F16 and BF16.
std::span<const std::size_t> quant_block_f16_fields(DType t);

Result<void> check_quant_blocks(const Tensor& t);

}  // namespace pensieve::model
