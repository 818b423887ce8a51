#pragma once
// Device and pinned host memory for the CUDA backend: owning buffers, a bump
// arena that carves one allocation into the weights' or activations' pieces,
// and the sizing rule of the KV block pool (vLLM's: of the device's total
// memory, take gpu_memory_fraction; what is in use already — this process's
// weights and activations, other processes — comes off first; the rest holds
// KV blocks). Owned by the worker that drives the device; not thread-safe.
#include "runtime/error.hpp"

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace pensieve::backend::cuda {

enum class MemoryKind : std::uint8_t { device, pinned_host };

// One cudaMalloc / cudaHostAlloc, freed on destruction. Move-only.
class MemoryBuffer {
 public:
  MemoryBuffer() = default;
  static Result<MemoryBuffer> create(std::size_t bytes, MemoryKind kind = MemoryKind::device);
  ~MemoryBuffer();
  MemoryBuffer(MemoryBuffer&& other) noexcept;
  MemoryBuffer& operator=(MemoryBuffer&& other) noexcept;
  MemoryBuffer(const MemoryBuffer&) = delete;
  MemoryBuffer& operator=(const MemoryBuffer&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  MemoryKind kind() const { return kind_; }

 private:
  void release();
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  MemoryKind kind_ = MemoryKind::device;
};

// Carves aligned pieces out of one buffer, front to back. Pieces live as long
// as the arena; there is no per-piece free (weights and activations are
// sized once).
class MemoryArena {
 public:
  MemoryArena() = default;
  static Result<MemoryArena> create(std::size_t bytes, MemoryKind kind = MemoryKind::device);

  // `bytes` rounded up to `align` (a power of two); an error when it does not fit.
  Result<void*> take(std::size_t bytes, std::size_t align = 256);
  template <class T>
  Result<T*> take_array(std::size_t count) {
    auto p = take(count * sizeof(T));
    if (!p) return p.error();
    return static_cast<T*>(*p);
  }
  std::size_t used_bytes() const { return used_; }
  std::size_t capacity_bytes() const { return buffer_.bytes(); }

 private:
  MemoryBuffer buffer_;
  std::size_t used_ = 0;
};

// Bytes an arena needs for pieces of these sizes, each aligned like take().
std::size_t arena_bytes(std::initializer_list<std::size_t> pieces, std::size_t align = 256);

struct DeviceMemoryInfo {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
};

// cudaMemGetInfo on the current device.
Result<DeviceMemoryInfo> query_device_memory();

// KV blocks that fit in fraction * total once the memory in use now
// (total - free) is taken off, keeping `reserve_bytes` spare (cuBLAS
// workspaces, graphs). 0 when nothing fits. Pure: tested without a device.
std::int64_t kv_blocks_for_budget(const DeviceMemoryInfo& info, double gpu_memory_fraction,
                                  std::size_t block_bytes, std::size_t reserve_bytes = 0);

}  // namespace pensieve::backend::cuda
