#pragma once
// AttentionWorkspace: the memory a CPU attention call needs besides its
// inputs and outputs: partial softmax states of split decode rows and each
// worker's scratch. Owned by the caller and reused across calls (it only
// grows); one call at a time.
#include <cstdint>
#include <vector>

namespace pensieve::kernels::cpu {

struct AttentionScratch {
  std::vector<float> scores;       // one kv tile of scores per query head of a KV head
  std::vector<float> tile_state;   // one softmax state per query head of a KV head
  std::vector<float> row_states;   // an item's (row, head) states
  std::vector<float> converted;    // a kv tile of K and V widened to F32
  std::vector<const float*> keys;  // the tile's key rows
  std::vector<const float*> values;
  std::vector<const std::uint16_t*> keys_f16;  // the same rows in an F16 pool, read in place
  std::vector<const std::uint16_t*> values_f16;
  std::vector<const std::uint16_t*> next_keys_f16;  // the next tile's, asked for a tile ahead
  std::vector<const std::uint16_t*> next_values_f16;
  std::vector<const float*> group_q;  // the query rows of a KV head's query heads
  std::vector<float*> group_states;   // and where their tile states go
};

struct AttentionWorkspace {
  std::vector<float> partial;
  std::vector<AttentionScratch> workers;
};

}  // namespace pensieve::kernels::cpu
