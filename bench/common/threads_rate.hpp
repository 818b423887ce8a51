#pragma once
// The best rate of a compute loop run by n_threads threads at once: `reps`
// rounds, each starting n_threads threads that call run() once and joining
// them; returns ops_per_round / the fastest round's seconds. What run()
// returns is kept, so its loop is not optimised away. The compute peaks
// (fma_peak.hpp, int8_dot_peak.hpp) are measured through it.
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace pensieve::bench {

template <class Run>
double best_threads_rate(int n_threads, int reps, double ops_per_round, const Run& run) {
  using Sink = decltype(run());
  std::vector<Sink> sink(static_cast<std::size_t>(n_threads));
  double best = 0.0;
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < n_threads; ++t) threads.emplace_back([&, t] { sink[std::size_t(t)] = run(); });
    for (auto& t : threads) t.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, ops_per_round / s);
  }
  volatile Sink keep = sink.empty() ? Sink{} : sink[0];
  (void)keep;
  return best;
}

}  // namespace pensieve::bench
