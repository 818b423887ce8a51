#include "gpu/backend/cuda/cuda_batch.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace pensieve::backend::cuda {
namespace {

std::size_t align16(std::size_t n) { return (n + 15) / 16 * 16; }

template <class T>
void put(std::byte* staging, std::size_t offset, const std::vector<T>& v) {
  if (!v.empty()) std::memcpy(staging + offset, v.data(), v.size() * sizeof(T));
}

}  // namespace

void build_host_batch(std::span<const model::PagedSequence> batch, std::int32_t block_tokens,
                      std::int32_t vocab_size, std::int32_t table_stride, HostBatch& b) {
  b.tokens.clear();
  b.positions.clear();
  b.slots.clear();
  b.q_start.assign(1, 0);
  b.context.clear();
  b.logit_rows.clear();
  b.output = model::ForwardOutput{vocab_size, {}, {0}, {}};
  std::size_t longest = 0;
  for (const auto& seq : batch) longest = std::max(longest, seq.blocks.size());
  b.table_stride = table_stride > 0 ? table_stride : std::int32_t(std::max<std::size_t>(longest, 1));
  assert(std::size_t(b.table_stride) >= longest);
  b.table.assign(batch.size() * std::size_t(b.table_stride), 0);
  for (std::size_t s = 0; s < batch.size(); ++s) {
    const model::PagedSequence& seq = batch[s];
    const auto n = std::int32_t(seq.tokens.size());
    const auto first = std::int32_t(b.tokens.size());
    for (std::size_t j = 0; j < seq.blocks.size(); ++j) {
      b.table[s * std::size_t(b.table_stride) + j] = std::int32_t(seq.blocks[j].value);
    }
    for (std::int32_t i = 0; i < n; ++i) {
      const std::int32_t pos = seq.start_pos + i;
      b.tokens.push_back(seq.tokens[std::size_t(i)]);
      b.positions.push_back(pos);
      b.slots.push_back(std::int64_t(seq.blocks[std::size_t(pos / block_tokens)].value) * block_tokens +
                        pos % block_tokens);
      if (seq.all_logits || i == n - 1) {
        b.logit_rows.push_back(first + i);
        b.output.row_position.push_back(pos);
      }
    }
    b.q_start.push_back(b.q_start.back() + n);
    b.context.push_back(seq.start_pos + n);
    b.output.first_row.push_back(b.logit_rows.size());
  }
}

kernels::AttentionPlan fixed_split_decode_plan(std::span<const std::int32_t> context,
                                               std::int32_t splits, std::int32_t tile) {
  kernels::AttentionPlan plan;
  plan.kv_tile_tokens = tile;
  plan.num_seqs = std::int32_t(context.size());
  plan.total_rows = plan.num_seqs;
  plan.decode = {kernels::DecodeStrategy::split_kv, splits, 0};
  for (std::int32_t s = 0; s < plan.num_seqs; ++s) {
    const std::int32_t ctx = context[std::size_t(s)];
    if (splits <= 1) {
      plan.items.push_back({s, 0, 1, 0, ctx, -1});
      continue;
    }
    const std::int32_t tiles = (ctx + tile - 1) / tile;
    const auto merge = std::int32_t(plan.merges.size());
    plan.merges.push_back({s, std::int32_t(plan.items.size()), splits, tiles, plan.partial_tiles});
    plan.partial_tiles += tiles;
    std::int32_t t = 0;
    for (std::int32_t p = 0; p < splits; ++p) {
      const std::int32_t len = tiles / splits + (p < tiles % splits ? 1 : 0);
      const std::int32_t begin = std::min(ctx, t * tile), end = std::min(ctx, (t + len) * tile);
      plan.items.push_back({s, 0, 1, begin, end, merge});
      t += len;
    }
  }
  return plan;
}

BatchLayout BatchLayout::of(const HostBatch& b) {
  BatchLayout l;
  l.n_tokens = b.n_tokens();
  l.n_seqs = b.n_seqs();
  l.table_stride = b.table_stride;
  l.n_logit_rows = std::int32_t(b.logit_rows.size());
  l.n_items = std::int32_t(b.plan.items.size());
  l.n_merges = std::int32_t(b.plan.merges.size());
  std::size_t at = 0;
  auto place = [&](std::size_t& field, std::size_t bytes) {
    field = at;
    at = align16(at + bytes);
  };
  place(l.tokens, b.tokens.size() * 4);
  place(l.positions, b.positions.size() * 4);
  place(l.slots, b.slots.size() * 8);
  place(l.q_start, b.q_start.size() * 4);
  place(l.context, b.context.size() * 4);
  place(l.table, b.table.size() * 4);
  place(l.logit_rows, b.logit_rows.size() * 4);
  place(l.items, b.plan.items.size() * sizeof(kernels::AttentionWorkItem));
  place(l.merges, b.plan.merges.size() * sizeof(kernels::AttentionMerge));
  l.bytes = std::max<std::size_t>(at, 16);
  return l;
}

void pack_batch(const HostBatch& b, const BatchLayout& l, std::byte* staging) {
  put(staging, l.tokens, b.tokens);
  put(staging, l.positions, b.positions);
  put(staging, l.slots, b.slots);
  put(staging, l.q_start, b.q_start);
  put(staging, l.context, b.context);
  put(staging, l.table, b.table);
  put(staging, l.logit_rows, b.logit_rows);
  put(staging, l.items, b.plan.items);
  put(staging, l.merges, b.plan.merges);
}

}  // namespace pensieve::backend::cuda
