#pragma once
// The loop structure shared by the paged and contiguous CPU attention
// kernels: run a plan's work items, then merge split decode rows. A Source
// says where the K/V rows of (sequence, KV head, token range) are:
//   void rows(int32 seq, int32 kv_head, int32 begin, int32 end,
//             const float** keys, const float** values, float* converted) const;
// (converted has room for 2 * (end - begin) * head_dim floats for sources
// that widen F16 to F32). A source may also have
//   bool rows_f16(int32 seq, int32 kv_head, int32 begin, int32 end,
//                 const uint16** keys, const uint16** values) const;
// which points at rows stored as F16 where they are and returns true, or
// returns false (the rows are not F16): the kernels then read them in place.
// Internal to gpu/kernels/cpu.
#include "gpu/kernels/cpu/attention_math.hpp"
#include "gpu/kernels/cpu/attention_work_runner.hpp"
#include "gpu/kernels/cpu/attention_workspace.hpp"
#include "gpu/kernels/cpu/paged_attention_plan.hpp"

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <utility>

namespace pensieve::kernels::cpu {

struct AttentionCoreArgs {
  const float* q = nullptr;  // [rows][n_heads][head_dim]
  float* out = nullptr;
  const std::int32_t* q_start = nullptr;
  const std::int32_t* context_tokens = nullptr;
  std::int32_t n_heads = 0;
  std::int32_t n_kv_heads = 0;
  std::int32_t head_dim = 0;
  float scale = 1.0f;
  std::int32_t window = 0;  // sliding window (PagedAttentionParams::sliding_window)
  float softcap = 0.0f;
};

namespace detail {

// Rows of one sequence that see the same keys of a tile (all of it) share a
// pass over its K and V: twice the independent sums per key, which the value
// loop's FMA latency needs (one row of a 2-head group keeps 4 chains busy).
inline constexpr std::size_t rows_per_pass = 2;

template <class Source>
concept HasF16Rows = requires(const Source& src, const std::uint16_t** rows) {
  { src.rows_f16(0, 0, 0, 0, rows, rows) } -> std::same_as<bool>;
};

inline void size_scratch(AttentionScratch& s, std::int32_t tile, std::int32_t head_dim,
                         std::int32_t group, std::int64_t pairs) {
  const auto state = static_cast<std::size_t>(attention_state_floats(head_dim));
  // Up to rows_per_pass rows' query heads go through one tile pass.
  const auto heads = static_cast<std::size_t>(group) * rows_per_pass;
  s.scores.resize(static_cast<std::size_t>(tile) * heads);
  s.tile_state.resize(state * heads);
  s.group_q.resize(heads);
  s.group_states.resize(heads);
  s.row_states.resize(state * static_cast<std::size_t>(pairs));
  s.converted.resize(2 * static_cast<std::size_t>(tile) * static_cast<std::size_t>(head_dim));
  s.keys.resize(static_cast<std::size_t>(tile));
  s.values.resize(static_cast<std::size_t>(tile));
  s.keys_f16.resize(static_cast<std::size_t>(tile));
  s.values_f16.resize(static_cast<std::size_t>(tile));
  s.next_keys_f16.resize(static_cast<std::size_t>(tile));
  s.next_values_f16.resize(static_cast<std::size_t>(tile));
}

// One (work item, KV head): every (row, head of the group) over the item's
// kv tiles, folding tile states in KV order or storing them for the merge.
// Row r sees keys [key_lo(r), its position]: the whole prefix, or its
// sliding window.
template <class Source>
void run_item(const AttentionCoreArgs& a, const AttentionPlan& plan, const AttentionWorkItem& item,
              std::int32_t kv_head, const Source& src, AttentionScratch& s, float* partial) {
  const std::int32_t group = a.n_heads / a.n_kv_heads, hd = a.head_dim, tile = plan.kv_tile_tokens;
  const std::int32_t state_floats = attention_state_floats(hd);
  const std::int32_t q0 = a.q_start[item.seq];
  const std::int32_t first_pos = a.context_tokens[item.seq] - (a.q_start[item.seq + 1] - q0);
  size_scratch(s, tile, hd, group, std::int64_t(item.row_count) * group);
  const AttentionMerge* merge =
      item.merge >= 0 ? &plan.merges[static_cast<std::size_t>(item.merge)] : nullptr;
  const std::int32_t last_row = item.row_begin + item.row_count - 1;
  const std::int32_t kv_end = std::min(item.kv_end, first_pos + last_row + 1);
  auto key_lo = [&](std::int32_t r) { return a.window > 0 ? std::max(0, first_pos + r - a.window + 1) : 0; };
  auto row_state = [&](std::int32_t r, std::int32_t g) {
    return s.row_states.data() + (std::int64_t(r - item.row_begin) * group + g) * state_floats;
  };
  // Every row starts with no keys (l = 0); the first tile that has some for
  // it writes its state, later ones fold into it.
  if (merge == nullptr) {
    for (std::int32_t r = item.row_begin; r <= last_row; ++r) {
      for (std::int32_t g = 0; g < group; ++g) row_state(r, g)[1] = 0.0f;
    }
  }
  // A split row keeps one state per tile, empty ones included; other items
  // skip the tiles before their first row's window.
  bool f16_direct = false;
  if constexpr (HasF16Rows<Source>) f16_direct = attention_tile_states_f16_direct(hd, a.softcap);
  std::int32_t k_begin = item.kv_begin;
  if (merge == nullptr) k_begin = std::max(k_begin, key_lo(item.row_begin) / tile * tile);
  // An F16 source's rows are read in place: each tile's pointers are found
  // a tile ahead, so its rows can be asked for while the one before computes.
  bool f16 = false;
  if constexpr (HasF16Rows<Source>) {
    f16 = f16_direct && k_begin < kv_end &&
          src.rows_f16(item.seq, kv_head, k_begin, std::min(k_begin + tile, kv_end),
                       s.next_keys_f16.data(), s.next_values_f16.data());
  }
  for (std::int32_t k0 = k_begin; k0 < kv_end; k0 += tile) {
    const std::int32_t k1 = std::min(k0 + tile, kv_end);
    AttentionNextRows next;
    if (f16) {
      std::swap(s.keys_f16, s.next_keys_f16);
      std::swap(s.values_f16, s.next_values_f16);
      if (k1 < kv_end) {
        const std::int32_t k2 = std::min(k1 + tile, kv_end);
        if constexpr (HasF16Rows<Source>) {
          src.rows_f16(item.seq, kv_head, k1, k2, s.next_keys_f16.data(), s.next_values_f16.data());
        }
        next = {s.next_keys_f16.data(), s.next_values_f16.data(), k2 - k1};
      }
    } else {
      src.rows(item.seq, kv_head, k0, k1, s.keys.data(), s.values.data(), s.converted.data());
    }
    const std::int32_t t = k0 / tile;
    auto partial_state = [&](std::int32_t qh) {
      return partial +
             ((merge->tile_base * a.n_heads) + std::int64_t(qh) * merge->num_tiles + t) * state_floats;
    };
    for (std::int32_t r = item.row_begin; r <= last_row;) {
      const std::int32_t lo = std::max(k0, key_lo(r)), hi = std::min(k1, first_pos + r + 1);
      const std::int32_t n_keys = hi - lo;
      if (n_keys <= 0) {
        if (merge != nullptr) {
          for (std::int32_t g = 0; g < group; ++g) attention_empty_state(partial_state(kv_head * group + g), hd);
        }
        ++r;
        continue;
      }
      const bool fresh = merge == nullptr && row_state(r, 0)[1] == 0.0f;
      // Two rows that see the same keys of this tile share a pass (a split
      // row's partial states have one slot per tile: never paired).
      std::int32_t rows = 1;
      if (merge == nullptr && r < last_row && std::max(k0, key_lo(r + 1)) == lo &&
          std::min(k1, first_pos + r + 2) == hi && (row_state(r + 1, 0)[1] == 0.0f) == fresh) {
        rows = 2;
      }
      // The group's query heads (of `rows` rows) share this KV head's keys: one pass for all.
      for (std::int32_t i = 0; i < rows; ++i) {
        for (std::int32_t g = 0; g < group; ++g) {
          const std::int32_t qh = kv_head * group + g, slot = i * group + g;
          s.group_q[std::size_t(slot)] = a.q + (std::int64_t(q0 + r + i) * a.n_heads + qh) * hd;
          float* target;
          if (merge != nullptr) {
            target = partial_state(qh);
          } else if (fresh) {
            target = row_state(r + i, g);
          } else {
            target = s.tile_state.data() + std::int64_t(slot) * state_floats;
          }
          s.group_states[std::size_t(slot)] = target;
        }
      }
      if (f16) {
        attention_tile_states_f16(s.group_q.data(), rows * group, s.keys_f16.data() + (lo - k0),
                                  s.values_f16.data() + (lo - k0), n_keys, hd, a.scale,
                                  s.scores.data(), s.group_states.data(), next);
        next = {};  // asked for by this tile's first pass
      } else {
        attention_tile_states(s.group_q.data(), rows * group, s.keys.data() + (lo - k0),
                              s.values.data() + (lo - k0), n_keys, hd, a.scale, s.scores.data(),
                              s.group_states.data(), a.softcap);
      }
      if (merge == nullptr && !fresh) {
        for (std::int32_t i = 0; i < rows; ++i) {
          for (std::int32_t g = 0; g < group; ++g) {
            attention_fold(row_state(r + i, g), s.group_states[std::size_t(i * group + g)], hd);
          }
        }
      }
      r += rows;
    }
  }
  if (merge != nullptr) return;
  for (std::int32_t r = item.row_begin; r <= last_row; ++r) {
    for (std::int32_t g = 0; g < group; ++g) {
      const std::int32_t qh = kv_head * group + g;
      attention_finish(row_state(r, g), hd, a.out + (std::int64_t(q0 + r) * a.n_heads + qh) * hd);
    }
  }
}

// One (split decode row, query head): folds its tile states in KV order.
inline void run_merge(const AttentionCoreArgs& a, const AttentionMerge& m, std::int32_t qh,
                      const float* partial, AttentionScratch& s) {
  const std::int32_t hd = a.head_dim, state_floats = attention_state_floats(hd);
  s.tile_state.resize(static_cast<std::size_t>(state_floats));
  const float* first =
      partial + (m.tile_base * a.n_heads + std::int64_t(qh) * m.num_tiles) * state_floats;
  std::memcpy(s.tile_state.data(), first, sizeof(float) * static_cast<std::size_t>(state_floats));
  for (std::int32_t t = 1; t < m.num_tiles; ++t)
    attention_fold(s.tile_state.data(), first + t * state_floats, hd);
  attention_finish(s.tile_state.data(), hd,
                   a.out + (std::int64_t(a.q_start[m.seq]) * a.n_heads + qh) * hd);
}

}  // namespace detail

template <class Source>
void run_attention_plan(const AttentionCoreArgs& a, const AttentionPlan& plan, const Source& src,
                        AttentionWorkspace& ws, WorkRunner& runner) {
  ws.workers.resize(static_cast<std::size_t>(std::max(1, runner.workers())));
  const auto partial_floats = static_cast<std::size_t>(plan.partial_tiles) *
                              static_cast<std::size_t>(a.n_heads) *
                              static_cast<std::size_t>(attention_state_floats(a.head_dim));
  if (ws.partial.size() < partial_floats) ws.partial.resize(partial_floats);
  float* partial = ws.partial.data();
  const std::int64_t items = std::int64_t(plan.items.size()) * a.n_kv_heads;
  runner.parallel_for(items, [&](std::int64_t i, std::int32_t worker) {
    detail::run_item(a, plan, plan.items[static_cast<std::size_t>(i / a.n_kv_heads)],
                     static_cast<std::int32_t>(i % a.n_kv_heads), src,
                     ws.workers[static_cast<std::size_t>(worker)], partial);
  });
  if (plan.merges.empty()) return;
  runner.parallel_for(std::int64_t(plan.merges.size()) * a.n_heads,
                      [&](std::int64_t i, std::int32_t worker) {
                        detail::run_merge(a, plan.merges[static_cast<std::size_t>(i / a.n_heads)],
                                          static_cast<std::int32_t>(i % a.n_heads), partial,
                                          ws.workers[static_cast<std::size_t>(worker)]);
                      });
}

}  // namespace pensieve::kernels::cpu
