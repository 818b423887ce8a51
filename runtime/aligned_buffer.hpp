#pragma once
// AlignedBuffer: owns `size_bytes` of memory whose start is aligned (4 KiB by
// default), as O_DIRECT transfers require. The allocation is rounded up to a
// whole number of alignment units, so an O_DIRECT read of the last partial
// block has room to land. Move-only; contents start zeroed.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <utility>

namespace pensieve::rt {

class AlignedBuffer {
 public:
  static constexpr std::size_t default_alignment_bytes = 4096;

  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t size_bytes,
                         std::size_t alignment_bytes = default_alignment_bytes)
      : size_bytes_(size_bytes),
        capacity_bytes_(round_up(size_bytes == 0 ? 1 : size_bytes, alignment_bytes)),
        alignment_bytes_(alignment_bytes) {
    data_ = static_cast<std::byte*>(std::aligned_alloc(alignment_bytes_, capacity_bytes_));
    if (data_ == nullptr) throw std::bad_alloc();
    std::memset(data_, 0, capacity_bytes_);
  }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_bytes_(std::exchange(other.size_bytes_, 0)),
        capacity_bytes_(std::exchange(other.capacity_bytes_, 0)),
        alignment_bytes_(other.alignment_bytes_) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    if (this != &other) {
      std::free(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_bytes_ = std::exchange(other.size_bytes_, 0);
      capacity_bytes_ = std::exchange(other.capacity_bytes_, 0);
      alignment_bytes_ = other.alignment_bytes_;
    }
    return *this;
  }

  std::byte* data() noexcept { return data_; }
  const std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_bytes_; }
  std::size_t capacity_bytes() const noexcept { return capacity_bytes_; }
  std::size_t alignment_bytes() const noexcept { return alignment_bytes_; }
  std::span<std::byte> span() noexcept { return {data_, size_bytes_}; }
  std::span<const std::byte> span() const noexcept { return {data_, size_bytes_}; }

  static constexpr std::size_t round_up(std::size_t n, std::size_t unit) {
    return (n + unit - 1) / unit * unit;
  }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_bytes_ = 0;
  std::size_t capacity_bytes_ = 0;
  std::size_t alignment_bytes_ = default_alignment_bytes;
};

}  // namespace pensieve::rt
