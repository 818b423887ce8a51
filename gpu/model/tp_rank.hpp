#pragma once
// Which shard of a tensor-parallel model a set of weights is: rank `rank` of
// `ranks` (gpu/model/tp_shard.hpp makes them). A shard's ModelConfig holds
// this rank's sizes (n_heads, n_kv_heads and ff_dim divided by ranks); the
// vocabulary stays whole, since the token embedding is replicated, and only
// the output head is split: rank r owns logits rows
// [vocab_begin(r), vocab_begin(r) + vocab_rows(r)) of vocab_slice() padded
// rows, so every rank's slice has the same length (NCCL's all-gather needs
// equal counts) and the last rank's padding is never read.
#include <algorithm>
#include <cstdint>

namespace pensieve::model {

struct TpRank {
  std::int32_t rank = 0;
  std::int32_t ranks = 1;

  bool sharded() const { return ranks > 1; }
  // Rows of the output head per rank, padding included: ceil(vocab / ranks).
  std::int32_t vocab_slice(std::int32_t vocab) const { return (vocab + ranks - 1) / ranks; }
  std::int32_t vocab_begin(std::int32_t vocab) const {
    return std::min(vocab, rank * vocab_slice(vocab));
  }
  // The real rows this rank owns (fewer than vocab_slice on the last rank).
  std::int32_t vocab_rows(std::int32_t vocab) const {
    return std::min(vocab_slice(vocab), vocab - vocab_begin(vocab));
  }
};

}  // namespace pensieve::model
