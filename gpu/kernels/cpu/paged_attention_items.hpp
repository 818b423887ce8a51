#pragma once
// The work items of a paged attention plan: plain data that the CUDA kernels
// read from device memory as they are (see paged_attention_plan.hpp).
#include <cstdint>

namespace pensieve::kernels {

// Rows are relative to the sequence's first new token. KV is [kv_begin,
// kv_end) in token positions, clipped causally per row.
struct AttentionWorkItem {
  std::int32_t seq = 0;
  std::int32_t row_begin = 0;
  std::int32_t row_count = 0;
  std::int32_t kv_begin = 0;
  std::int32_t kv_end = 0;
  std::int32_t merge = -1;  // -1: the item covers its rows' whole context and writes out
};

// A decode row whose KV was split: its items are items[first_item,
// first_item + item_count), in KV order; they cover kv tiles [0, num_tiles).
struct AttentionMerge {
  std::int32_t seq = 0;
  std::int32_t first_item = 0;
  std::int32_t item_count = 0;
  std::int32_t num_tiles = 0;
  std::int64_t tile_base = 0;  // prefix sum of num_tiles over earlier merges
};

}  // namespace pensieve::kernels
