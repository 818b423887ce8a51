#pragma once
// The CUDA backend of Stream: owns one cudaStream_t (non-blocking with respect
// to the legacy default stream) on one device. Host functions and event
// completions run from CUDA's callback thread through cudaLaunchHostFunc;
// they only complete an EventState, which posts continuations to executors.
// Stream::wait is cudaStreamWaitEvent: the dependency stays on the device.
//
// Failures: create() returns an Error naming the failing CUDA call and its
// error string; a failing call on a live stream (a device fault, a sticky
// error) throws CudaError with the same message.
#include "runtime/error.hpp"
#include "runtime/stream.hpp"
#include "runtime/trace.hpp"

#include <cuda_runtime_api.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace pensieve::rt {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "cudaStreamCreate failed: out of memory (cudaErrorMemoryAllocation)".
std::string cuda_error_message(const char* call, cudaError_t status);

class CudaStream final : public Stream {
 public:
  static Result<std::unique_ptr<CudaStream>> create(int device, std::string_view name,
                                                    Tracer* tracer = nullptr);
  ~CudaStream() override;  // synchronizes, then destroys the stream
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  StreamBackend backend() const noexcept override { return StreamBackend::cuda; }
  std::string_view name() const noexcept override { return name_view_; }
  void enqueue(HostFn fn, std::string_view op = "host_fn") override;
  void copy(void* dst, const void* src, std::size_t bytes, std::string_view op = "copy") override;
  Event record() override;
  // `event` must come from a CUDA stream (or be a default, complete Event).
  void wait(const Event& event) override;

  cudaStream_t native() const noexcept { return stream_; }
  int device() const noexcept { return device_; }

 private:
  CudaStream(int device, cudaStream_t stream, std::string_view name, Tracer* tracer);
  void launch_host_fn(HostFn fn);

  int device_;
  cudaStream_t stream_;
  Tracer* tracer_;
  std::string name_;
  std::string_view name_view_;
};

}  // namespace pensieve::rt
