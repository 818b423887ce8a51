#pragma once
// Stream: an ordered queue of device work. Work enqueued on one stream runs
// in order, one piece after another; different streams may run concurrently.
// Code that launches work (the forward pass, the swap engine's copies) takes
// a `Stream&` and does not care whether it is a CPU stream (cpu_stream.hpp)
// or a CUDA stream (cuda/cuda_stream.hpp); kernels that need the native
// handle downcast once at the backend boundary (see backend()).
//
// Threads: every method may be called from any thread; calls from several
// threads are ordered by the stream's internal lock, in call order.
#include "runtime/event.hpp"

#include <cstddef>
#include <string_view>

namespace pensieve::rt {

enum class StreamBackend { cpu, cuda };

class Stream {
 public:
  virtual ~Stream() = default;

  virtual StreamBackend backend() const noexcept = 0;
  // The name spans are recorded under ("compute", "copy.h2d").
  virtual std::string_view name() const noexcept = 0;

  // Runs `fn` on the host once the work enqueued before it has completed;
  // later work waits for it. `op` names the span; it must be long-lived (a
  // literal). `fn` must not throw and, on CUDA, must not call CUDA (nor
  // destroy a captured CUDA resource, such as the last copy of an Event).
  virtual void enqueue(HostFn fn, std::string_view op = "host_fn") = 0;

  // Copies `bytes` from `src` to `dst` in stream order. On CUDA either side
  // may be device or (preferably pinned) host memory.
  virtual void copy(void* dst, const void* src, std::size_t bytes,
                    std::string_view op = "copy") = 0;

  // An Event that completes once the work enqueued so far has completed.
  virtual Event record() = 0;

  // Work enqueued after this call starts only once `event` has completed.
  // Never blocks the calling thread.
  virtual void wait(const Event& event) = 0;

  // Blocks the calling thread until the work enqueued so far has completed.
  // For shutdown and tests; coroutines `co_await record().wait(ex)` instead.
  void synchronize() { record().wait_blocking(); }

 protected:
  Stream() = default;
  Stream(const Stream&) = default;
  Stream& operator=(const Stream&) = default;
};

}  // namespace pensieve::rt
