#include "runtime/cuda/cuda_stream.hpp"

#include <cstdio>

namespace pensieve::rt {
namespace {

void check(const char* call, cudaError_t status) {
  if (status != cudaSuccess) throw CudaError(cuda_error_message(call, status));
}

// Owns a HostFn across cudaLaunchHostFunc's C callback.
void CUDART_CB run_host_fn(void* user_data) {
  std::unique_ptr<HostFn> fn(static_cast<HostFn*>(user_data));
  (*fn)();
}

// Deleter of the device event an Event owns; a failure here cannot be
// reported to anyone but the log.
void destroy_event(void* event) {
  const cudaError_t status = cudaEventDestroy(static_cast<cudaEvent_t>(event));
  if (status != cudaSuccess) {
    std::fprintf(stderr, "pensieve: %s\n", cuda_error_message("cudaEventDestroy", status).c_str());
  }
}

}  // namespace

std::string cuda_error_message(const char* call, cudaError_t status) {
  return std::string(call) + " failed: " + cudaGetErrorString(status) + " (" +
         cudaGetErrorName(status) + ")";
}

Result<std::unique_ptr<CudaStream>> CudaStream::create(int device, std::string_view name,
                                                       Tracer* tracer) {
  cudaError_t status = cudaSetDevice(device);
  if (status != cudaSuccess) return fail(cuda_error_message("cudaSetDevice", status));
  cudaStream_t stream = nullptr;
  status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (status != cudaSuccess) return fail(cuda_error_message("cudaStreamCreateWithFlags", status));
  return std::unique_ptr<CudaStream>(new CudaStream(device, stream, name, tracer));
}

CudaStream::CudaStream(int device, cudaStream_t stream, std::string_view name, Tracer* tracer)
    : device_(device), stream_(stream), tracer_(tracer), name_(name) {
  name_view_ = tracer_ != nullptr ? tracer_->intern(name_) : std::string_view(name_);
}

CudaStream::~CudaStream() {
  for (auto [call, status] : {std::pair{"cudaStreamSynchronize", cudaStreamSynchronize(stream_)},
                              std::pair{"cudaStreamDestroy", cudaStreamDestroy(stream_)}}) {
    if (status != cudaSuccess) {
      std::fprintf(stderr, "pensieve: %s\n", cuda_error_message(call, status).c_str());
    }
  }
}

void CudaStream::launch_host_fn(HostFn fn) {
  auto owned = std::make_unique<HostFn>(std::move(fn));
  check("cudaLaunchHostFunc", cudaLaunchHostFunc(stream_, &run_host_fn, owned.get()));
  owned.release();  // run_host_fn owns it now
}

void CudaStream::enqueue(HostFn fn, std::string_view op) {
  if (tracer_ == nullptr || !tracer_->enabled()) {
    launch_host_fn(std::move(fn));
    return;
  }
  launch_host_fn([fn = std::move(fn), tracer = tracer_, name = name_view_, op]() mutable {
    TraceSpan span(tracer, SpanKind::stream, name, op);
    fn();
  });
}

void CudaStream::copy(void* dst, const void* src, std::size_t bytes, std::string_view op) {
  const std::int64_t start_ns = tracer_ != nullptr && tracer_->enabled() ? steady_now_ns() : 0;
  check("cudaMemcpyAsync", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
  if (start_ns != 0) {
    // The span covers enqueue to completion as seen from the host.
    launch_host_fn([tracer = tracer_, name = name_view_, op, start_ns, bytes] {
      tracer->record(SpanRecord{SpanKind::stream, name, op, bytes, start_ns, steady_now_ns()});
    });
  }
}

Event CudaStream::record() {
  cudaEvent_t raw = nullptr;
  check("cudaEventCreateWithFlags", cudaEventCreateWithFlags(&raw, cudaEventDisableTiming));
  std::shared_ptr<void> device_event(static_cast<void*>(raw), &destroy_event);
  check("cudaEventRecord", cudaEventRecord(raw, stream_));
  auto state = std::make_shared<detail::EventState>();
  launch_host_fn([state] { state->complete(); });
  return Event(std::move(state), std::move(device_event));
}

void CudaStream::wait(const Event& event) {
  if (event.device_event() == nullptr) {
    if (event.is_complete()) return;
    throw CudaError("CudaStream::wait: the event is not a CUDA event (" + name_ + ")");
  }
  check("cudaStreamWaitEvent",
        cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(event.device_event()), 0));
}

}  // namespace pensieve::rt
