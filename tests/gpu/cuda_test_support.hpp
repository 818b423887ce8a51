#pragma once
// Helpers of the CUDA backend's [gpu] tests: the device-or-skip gate (exit
// 77, reported as SKIPPED by ctest and device-checks.sh, never as a pass),
// owning device copies of host arrays, and error measures.
#include "gpu/backend/cuda/device_memory.hpp"
#include "gpu/formats/half.hpp"
#include "tests/shared_data.hpp"

#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace pensieve::testing {

// Exits the test process as skipped when no CUDA device is usable.
inline void require_cuda_device() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::fprintf(stderr, "SKIPPED: no CUDA device (%s)\n",
                 e == cudaSuccess ? "none found" : cudaGetErrorString(e));
    std::exit(skip_exit_code);
  }
}

inline void cuda_require(cudaError_t e) {
  INFO(cudaGetErrorName(e) << ": " << cudaGetErrorString(e));
  REQUIRE(e == cudaSuccess);
}

// A device buffer holding a copy of `host` (or `bytes` uninitialised bytes).
struct DeviceCopy {
  backend::cuda::MemoryBuffer buffer;
  explicit DeviceCopy(std::size_t bytes) {
    auto b = backend::cuda::MemoryBuffer::create(std::max<std::size_t>(bytes, 16));
    INFO((b ? std::string() : b.error().message));
    REQUIRE(b.has_value());
    buffer = std::move(*b);
  }
  template <class T>
  explicit DeviceCopy(const std::vector<T>& host) : DeviceCopy(host.size() * sizeof(T)) {
    cuda_require(cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(buffer.data());
  }
  template <class T>
  std::vector<T> read(std::size_t count) const {
    std::vector<T> out(count);
    cuda_require(cudaMemcpy(out.data(), buffer.data(), count * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }
};

// 16-bit words of x rounded to f16 or bf16, and back.
inline std::vector<std::uint16_t> to_half_words(const std::vector<float>& x, bool bf16) {
  std::vector<std::uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = bf16 ? f32_to_bf16(x[i]) : f32_to_f16(x[i]);
  return out;
}
inline std::vector<float> from_half_words(const std::vector<std::uint16_t>& x, bool bf16) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = bf16 ? bf16_to_f32(x[i]) : f16_to_f32(x[i]);
  return out;
}

// max |a - b| / max |b|: the error relative to the reference's scale. NaN
// anywhere gives infinity (an unwritten or poisoned element never passes).
inline double max_rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// ||a - b|| / ||b|| over one row (the logits measure of the device checks).
inline double norm_rel_error(const float* a, const float* b, std::size_t n) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
    diff += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    ref += double(b[i]) * double(b[i]);
  }
  return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
}

// One line per measured quantity, read by tests/gpu/device-checks.sh for its table.
inline void report_metric(const char* name, double value) {
  std::printf("METRIC %s %.6g\n", name, value);
  std::fflush(stdout);
}

}  // namespace pensieve::testing
