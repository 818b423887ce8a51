#pragma once
// Splits `total` units (cache lines of the next tile) over `parts` steps
// (the blocks of the current one) as part p getting
// [total * p / parts, total * (p + 1) / parts), without a division a step:
// the quotient and a remainder count. The tiles' prefetch (StepPrefetch,
// prefetch.hpp) issues each block's share this way; a division
// pair per block cost one token 3-10% of its time from the L2 (AMD Zen 5,
// bench/results/2026-12-07-amd-zen5-kquant-tile-limits.md).
#include <cstddef>

namespace pensieve::kernels::cpu {

class BlockShares {
 public:
  constexpr BlockShares(std::size_t total, std::size_t parts)
      : parts_(parts),
        per_part_(parts ? total / parts : 0),
        remainder_(parts ? total % parts : 0) {}

  // The next part's count.
  constexpr std::size_t next() {
    if (parts_ == 0) return 0;
    std::size_t n = per_part_;
    count_ += remainder_;
    if (count_ >= parts_) {
      count_ -= parts_;
      ++n;
    }
    return n;
  }

 private:
  std::size_t parts_, per_part_, remainder_, count_ = 0;
};

}  // namespace pensieve::kernels::cpu
