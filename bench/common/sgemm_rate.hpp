#pragma once
// The machine's single-precision matrix-multiply rate through OpenBLAS
// (cblas_sgemm), the reference a prefill step is held against.
// Call from one thread; OpenBLAS runs its own threads (set here).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace pensieve::bench {

struct SgemmResult {
  double best_gflops = 0.0;  // 1e9 floating-point operations (2*m*n*k) per second
  double median_gflops = 0.0;
  int m = 0, n = 0, k = 0;
  int threads = 0;
  int reps = 0;
};

// C{m,n} = A{m,k} * B{n,k}^T: activations times a row-major weight matrix,
// the shape of one prefill projection (m tokens, k inputs, n outputs).
inline SgemmResult measure_sgemm(int m, int n, int k, int n_threads, int reps) {
  openblas_set_num_threads(n_threads);
  std::vector<float> a(static_cast<std::size_t>(m) * static_cast<std::size_t>(k));
  std::vector<float> b(static_cast<std::size_t>(n) * static_cast<std::size_t>(k));
  std::vector<float> c(static_cast<std::size_t>(m) * static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 7) * 0.02f - 0.07f;
  const double flops = 2.0 * m * n * k;
  std::vector<double> rates;
  for (int r = 0; r <= reps; ++r) {  // the first run warms up OpenBLAS's threads and buffers
    const auto start = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a.data(), k, b.data(), k,
                0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) rates.push_back(flops / s / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return {rates.back(), rates[rates.size() / 2], m, n, k, n_threads, reps};
}

}  // namespace pensieve::bench
