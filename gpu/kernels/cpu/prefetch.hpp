#pragma once
// Software prefetches into the L2 for the decode tiles (internal to
// gpu/kernels/cpu). Not _mm_prefetch: GCC 12 drops a call to an inline
// function whose only effect is __builtin_prefetch (its IPA mod/ref
// analysis finds no side effect, so the call is dead; -fno-ipa-modref keeps
// it). The Q8_0 decode tile lost all its prefetches that way (408caeb, fixed
// in eb8ad46: decode from DRAM fell ~20%) while its tests, which check values, passed.
// A volatile asm statement is never removed.
#include "gpu/kernels/cpu/block_shares.hpp"
#include "gpu/kernels/cpu/cpu_tuning.hpp"

#include <cstddef>
#include <cstdint>

namespace pensieve::kernels::cpu {

inline void prefetch_l2(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 2);
#endif
}

// The same into the L1.
inline void prefetch_l1(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 3);
#endif
}

// Into the level P names.
template <PrefetchInto P>
inline void prefetch_into(const void* p) {
  if constexpr (P == PrefetchInto::l2)
    prefetch_l2(p);
  else
    prefetch_l1(p);
}

// The lines of [pf, pf + pf_bytes) (the next tile) over a tile's `steps`
// steps, taken in order: each step() asks for its share (BlockShares) into
// the level P. A null pf asks for nothing.
template <PrefetchInto P>
class StepPrefetch {
 public:
  StepPrefetch(const std::byte* pf, std::size_t pf_bytes, std::int64_t steps)
      : next_(pf), shares_(pf ? (pf_bytes + 63) / 64 : 0, std::size_t(steps)) {}
  __attribute__((always_inline)) void step() {
    if (next_ == nullptr) return;
    const std::size_t n = shares_.next();
    for (std::size_t l = 0; l < n; ++l) prefetch_into<P>(next_ + 64 * l);
    next_ += 64 * n;
  }

 private:
  const std::byte* next_;
  BlockShares shares_;
};

// `Lines` lines from p on.
template <int Lines>
inline void prefetch_l2_lines(const void* p) {
#pragma GCC unroll 16
  for (int l = 0; l < Lines; ++l) prefetch_l2(static_cast<const char*>(p) + 64 * l);
}

}  // namespace pensieve::kernels::cpu
