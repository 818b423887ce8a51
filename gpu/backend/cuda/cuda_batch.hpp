#pragma once
// The per-batch inputs of the CUDA forward pass, built on the host and sent
// in one copy: token ids, positions, KV slots, the attention kernel's q_start,
// context lengths, block table and work items, and the rows whose logits are
// wanted. Pure host code: no CUDA calls.
#include "gpu/kernels/cpu/paged_attention_plan.hpp"
#include "gpu/model/cpu_forward.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace pensieve::backend::cuda {

struct HostBatch {
  std::vector<std::int32_t> tokens, positions;
  std::vector<std::int64_t> slots;
  std::vector<std::int32_t> q_start, context;
  std::vector<std::int32_t> table;  // [seqs][table_stride]
  std::int32_t table_stride = 0;
  std::vector<std::int32_t> logit_rows;  // batch row of each logits row
  kernels::AttentionPlan plan;
  model::ForwardOutput output;  // first_row and row_position filled; logits empty

  std::int32_t n_tokens() const { return std::int32_t(tokens.size()); }
  std::int32_t n_seqs() const { return std::int32_t(context.size()); }
  bool decode_only() const { return tokens.size() == context.size(); }
};

// Fills everything but the plan. table_stride 0: the batch's longest block list.
void build_host_batch(std::span<const model::PagedSequence> batch, std::int32_t block_tokens,
                      std::int32_t vocab_size, std::int32_t table_stride, HostBatch& out);

// A decode-only plan with a fixed shape for CUDA graphs: `splits` items per
// sequence (KV cut at multiples of tile_tokens, trailing items empty when the
// context is short) and one merge per sequence when splits > 1, so the launch
// grid never changes while the contexts grow.
kernels::AttentionPlan fixed_split_decode_plan(std::span<const std::int32_t> context,
                                               std::int32_t splits, std::int32_t tile_tokens);

// Byte offsets of each array in the device copy; depend only on the counts,
// so a graph captured for one shape reads every later batch of that shape.
struct BatchLayout {
  std::size_t tokens = 0, positions = 0, slots = 0, q_start = 0, context = 0, table = 0,
              logit_rows = 0, items = 0, merges = 0, bytes = 0;
  std::int32_t n_tokens = 0, n_seqs = 0, table_stride = 0, n_logit_rows = 0, n_items = 0,
               n_merges = 0;
  static BatchLayout of(const HostBatch& b);
  bool same_shape(const BatchLayout& o) const {
    return n_tokens == o.n_tokens && n_seqs == o.n_seqs && table_stride == o.table_stride &&
           n_logit_rows == o.n_logit_rows && n_items == o.n_items && n_merges == o.n_merges;
  }
};

// Writes the batch into `staging` (layout.bytes long) at the layout's offsets.
void pack_batch(const HostBatch& b, const BatchLayout& layout, std::byte* staging);

}  // namespace pensieve::backend::cuda
