#pragma once
// The decode plan policy: which of the three decode strategies a batch's
// decode rows (sequences with one new token) use, chosen from the batch size
// and the distribution of context lengths. Pure: no device, no clock. The
// CUDA and CPU backends run the same choice (as launches or as loop orders
// over threads); every strategy computes the same bits on the CPU because KV
// is split only at fixed kv-tile boundaries and merged in a fixed order.
#include <cstdint>
#include <span>
#include <string>

namespace pensieve::kernels {

enum class DecodeStrategy : std::uint8_t {
  per_sequence,  // one work item per (sequence, KV head): many short-to-medium sequences
  split_kv,      // each sequence's KV split across items, partial states merged: few long ones
  packed,        // (sequence, KV range) items of equal size from the actual lengths: mixed lengths
};

const char* decode_strategy_name(DecodeStrategy s);

struct DecodePlanChoice {
  DecodeStrategy strategy = DecodeStrategy::per_sequence;
  std::int32_t num_splits = 1;      // split_kv: items per sequence (at most its kv tiles)
  std::int32_t tiles_per_item = 0;  // packed: kv tiles per item
  std::string describe() const;     // for the trace
  friend bool operator==(const DecodePlanChoice&, const DecodePlanChoice&) = default;
};

// The chooser's thresholds. The defaults are provisional: they are meant to be
// replaced by a table measured on the device (bench/results/), loaded by the
// caller.
struct DecodePlanThresholds {
  // Work items per worker (SM or thread) below which the batch cannot fill
  // the machine with one item per (sequence, KV head).
  double min_items_per_worker = 2.0;
  // Split only sequences at least this long; shorter ones cost less than a merge.
  std::int32_t split_min_context_tokens = 1024;
  // max/mean context length above which one item per sequence leaves workers
  // idle behind the longest sequence: pack instead.
  double packed_imbalance_ratio = 4.0;
  // Target items per worker for split and packed plans.
  double target_items_per_worker = 4.0;
};

struct DecodeBatchShape {
  std::span<const std::int32_t> context_tokens;  // of the decode rows' sequences
  std::int32_t n_kv_heads = 1;
  std::int32_t workers = 1;  // SMs on CUDA, threads on the CPU
  std::int32_t kv_tile_tokens = 256;
};

DecodePlanChoice choose_decode_plan(const DecodeBatchShape& shape,
                                    const DecodePlanThresholds& thresholds = {});

}  // namespace pensieve::kernels
