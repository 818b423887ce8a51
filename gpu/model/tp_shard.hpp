#pragma once
// Tensor-parallel shards of a model (Megatron-style), for rank r of N:
// - column-parallel Q/K/V (and their biases) and gate/up: rank r owns query
//   heads [r*H/N, (r+1)*H/N), KV heads [r*K/N, (r+1)*K/N) and ff rows
//   [r*F/N, (r+1)*F/N). Because H/K query heads share one KV head and both
//   splits are contiguous, rank r's local query head h uses local KV head
//   h / (H/K): grouped-query attention keeps its grouping, and the rank's KV
//   pool holds only its K/N heads (the same layout with n_kv_heads = K/N);
// - row-parallel O and down: each rank holds the columns that match its
//   heads / ff rows, so its product is a partial sum that an all-reduce
//   completes (after attention's O projection and after the MLP's down);
// - vocabulary-parallel output head: rank r owns rows TpRank::vocab_begin..
//   (the tied embedding's rows when the model ties them); each rank computes
//   its logits slice and an all-gather joins them;
// - the token embedding, the norms and RoPE's frequencies are replicated:
//   the lookup is a gather with no arithmetic to split, and a
//   vocabulary-parallel embedding would cost one more all-reduce per pass.
//
// Row slices are views of the full model's storage (no copy); column slices
// of O and down are copied (each row's slice is not contiguous), so a shard
// costs about (q_dim + ff_dim) * dim / N weights of extra memory. Quantised
// column slices must start on a block boundary (Q8_0: 32 columns).
//
// The shard's ModelConfig holds the rank's sizes (n_heads, n_kv_heads,
// ff_dim divided by N; dim, head_dim and vocab_size whole). CpuForward runs
// it with CpuForwardOptions::tp and a Collective (gpu/model/tp_forward.hpp).
#include "gpu/model/model_weights.hpp"
#include "gpu/model/tp_rank.hpp"
#include "runtime/error.hpp"

namespace pensieve::model {

// Ok when the model splits `ranks` ways: ranks >= 1 divides n_heads,
// n_kv_heads and ff_dim, and every rank gets at least one vocabulary row.
Result<void> check_tensor_parallel(const ModelConfig& config, std::int32_t ranks);

// The weights of rank tp.rank of tp.ranks (tp.ranks == 1: the model itself).
// The shard shares the full model's storage and keeps it alive.
Result<ModelWeights> shard_weights(const ModelWeights& full, TpRank tp);

}  // namespace pensieve::model
