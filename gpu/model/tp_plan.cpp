#include "gpu/model/tp_plan.hpp"

#include <cstring>
#include <string>

namespace pensieve::model {

std::vector<TpLogitCopy> tp_logit_copies(std::int32_t ranks, std::int32_t vocab, std::int32_t rows) {
  std::vector<TpLogitCopy> copies;
  if (ranks < 1 || vocab < 1 || rows < 1) return copies;
  for (std::int32_t r = 0; r < ranks; ++r) {
    const TpRank tp{r, ranks};
    const std::size_t slice = std::size_t(tp.vocab_slice(vocab));
    const std::int32_t width = tp.vocab_rows(vocab);
    if (width <= 0) continue;
    TpLogitCopy c;
    c.src_offset = std::size_t(r) * std::size_t(rows) * slice;
    c.src_pitch = slice;
    c.dst_offset = std::size_t(tp.vocab_begin(vocab));
    c.dst_pitch = std::size_t(vocab);
    c.width = std::size_t(width);
    c.rows = std::size_t(rows);
    copies.push_back(c);
  }
  return copies;
}

void apply_logit_copies(const std::vector<TpLogitCopy>& copies, const float* src, float* dst) {
  for (const TpLogitCopy& c : copies) {
    for (std::size_t i = 0; i < c.rows; ++i) {
      std::memcpy(dst + c.dst_offset + i * c.dst_pitch, src + c.src_offset + i * c.src_pitch, c.width * sizeof(float));
    }
  }
}

Result<std::vector<int>> tp_devices(std::int32_t ranks, int devices) {
  if (ranks < 1) return fail("--tp must be at least 1, not " + std::to_string(ranks));
  if (devices < ranks) {
    return fail("--tp " + std::to_string(ranks) + " --backend cuda needs one CUDA device per rank; this machine has " +
                std::to_string(devices) + " (NCCL refuses two ranks of one communicator on one device)");
  }
  std::vector<int> out(static_cast<std::size_t>(ranks));
  for (std::int32_t r = 0; r < ranks; ++r) out[std::size_t(r)] = r;
  return out;
}

}  // namespace pensieve::model
