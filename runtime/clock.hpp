#pragma once
// The one clock that trace spans and runtime timings use: the steady clock in
// nanoseconds since an arbitrary epoch (comparable within one boot only).
#include <chrono>
#include <cstdint>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace pensieve::rt {

inline std::int64_t steady_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A cheap, monotonic tick count for timing short spans: the TSC on x86-64
// (a third of a steady-clock read), the steady clock elsewhere. Ticks become
// steady-clock nanoseconds through two (ticks, ns) anchors (Tracer::drain).
inline std::uint64_t cpu_ticks() noexcept {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return static_cast<std::uint64_t>(steady_now_ns());
#endif
}

}  // namespace pensieve::rt
