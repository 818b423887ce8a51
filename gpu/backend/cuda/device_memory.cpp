#include "gpu/backend/cuda/device_memory.hpp"

#include "gpu/backend/cuda/cuda_check.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

namespace pensieve::backend::cuda {
namespace {

std::size_t align_up(std::size_t n, std::size_t align) { return (n + align - 1) / align * align; }

}  // namespace

Result<MemoryBuffer> MemoryBuffer::create(std::size_t bytes, MemoryKind kind) {
  MemoryBuffer b;
  b.kind_ = kind;
  if (bytes == 0) return b;
  if (kind == MemoryKind::device) {
    PENSIEVE_CUDA_TRY(cudaMalloc(&b.data_, bytes));
  } else {
    // Portable: every context may copy from it; the host tier outlives any one stream.
    PENSIEVE_CUDA_TRY(cudaHostAlloc(&b.data_, bytes, cudaHostAllocPortable));
  }
  b.bytes_ = bytes;
  return b;
}

MemoryBuffer::~MemoryBuffer() { release(); }

MemoryBuffer::MemoryBuffer(MemoryBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      kind_(other.kind_) {}

MemoryBuffer& MemoryBuffer::operator=(MemoryBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    kind_ = other.kind_;
  }
  return *this;
}

void MemoryBuffer::release() {
  if (data_ == nullptr) return;
  // A failing free means the context is gone; nobody can act on it but the log.
  const cudaError_t status = kind_ == MemoryKind::device ? cudaFree(data_) : cudaFreeHost(data_);
  if (status != cudaSuccess) {
    std::fprintf(stderr, "pensieve: %s\n",
                 check_cuda(status, "MemoryBuffer free").error().message.c_str());
  }
  data_ = nullptr;
  bytes_ = 0;
}

Result<MemoryArena> MemoryArena::create(std::size_t bytes, MemoryKind kind) {
  auto buffer = MemoryBuffer::create(bytes, kind);
  if (!buffer) return buffer.error();
  MemoryArena arena;
  arena.buffer_ = std::move(*buffer);
  return arena;
}

Result<void*> MemoryArena::take(std::size_t bytes, std::size_t align) {
  const std::size_t start = align_up(used_, align);
  if (start + bytes > buffer_.bytes()) {
    return fail("memory arena: " + std::to_string(bytes) + " bytes do not fit (" +
                std::to_string(buffer_.bytes() - std::min(start, buffer_.bytes())) + " left)");
  }
  used_ = start + bytes;
  return static_cast<void*>(static_cast<std::byte*>(buffer_.data()) + start);
}

std::size_t arena_bytes(std::initializer_list<std::size_t> pieces, std::size_t align) {
  std::size_t total = 0;
  for (std::size_t p : pieces) total = align_up(total, align) + p;
  return total;
}

Result<DeviceMemoryInfo> query_device_memory() {
  DeviceMemoryInfo info;
  PENSIEVE_CUDA_TRY(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  return info;
}

std::int64_t kv_blocks_for_budget(const DeviceMemoryInfo& info, double gpu_memory_fraction,
                                  std::size_t block_bytes, std::size_t reserve_bytes) {
  if (block_bytes == 0 || gpu_memory_fraction <= 0.0 || info.free_bytes > info.total_bytes) return 0;
  const double budget = gpu_memory_fraction * double(info.total_bytes);
  const double in_use = double(info.total_bytes - info.free_bytes) + double(reserve_bytes);
  // Never more than is free now, whatever the fraction says.
  const double room = std::min(budget - in_use, double(info.free_bytes) - double(reserve_bytes));
  if (room <= 0.0) return 0;
  return std::int64_t(room / double(block_bytes));
}

}  // namespace pensieve::backend::cuda
