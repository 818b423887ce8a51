#include "actors/kv_copy_plan.hpp"

#include <algorithm>

namespace pensieve::actors {

std::vector<ChunkRun> plan_chunk_runs(std::span<const SlotCopy> copies, bool gather, std::uint32_t max_count) {
  std::vector<ChunkRun> runs;
  runs.reserve(copies.size());
  if (!gather) {
    for (const SlotCopy& c : copies) runs.push_back({c.src, c.dst, 1});
    return runs;
  }
  std::vector<SlotCopy> sorted(copies.begin(), copies.end());
  std::sort(sorted.begin(), sorted.end(), [](const SlotCopy& a, const SlotCopy& b) { return a.src < b.src; });
  for (const SlotCopy& c : sorted) {
    if (!runs.empty()) {
      ChunkRun& last = runs.back();
      if (last.count < max_count && c.src == last.src + last.count && c.dst == last.dst + last.count) {
        ++last.count;
        continue;
      }
    }
    runs.push_back({c.src, c.dst, 1});
  }
  return runs;
}

}  // namespace pensieve::actors
