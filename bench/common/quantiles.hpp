#pragma once
// Exact quantiles of a benchmark's samples (every sample kept, none
// estimated): the nearest rank, q * (n - 1) rounded.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace pensieve::bench {

struct Quantiles {
  double p50 = 0, p99 = 0, p999 = 0, max = 0;
};

// The q-quantile of ascending samples; 0 for none.
inline double quantile_of_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto i = std::size_t(q * double(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

// Sorts the samples in place.
inline Quantiles quantiles(std::vector<double>& samples) {
  std::sort(samples.begin(), samples.end());
  return {quantile_of_sorted(samples, 0.5), quantile_of_sorted(samples, 0.99),
          quantile_of_sorted(samples, 0.999), samples.empty() ? 0 : samples.back()};
}

}  // namespace pensieve::bench
