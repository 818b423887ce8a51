#pragma once
// A read-only memory map of a whole file. Owns the mapping; shared by every
// ModelWeights / GgufFile view into it, so it is handed out as a shared_ptr.
// Immutable after open(): safe to read from any thread.
#include "runtime/error.hpp"

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>

namespace pensieve::model {

class MappedFile {
 public:
  static Result<std::shared_ptr<const MappedFile>> open(const std::filesystem::path& path);

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_bytes_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile(std::filesystem::path path, const std::byte* data, std::size_t size_bytes)
      : path_(std::move(path)), data_(data), size_bytes_(size_bytes) {}

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;  // nullptr for an empty file
  std::size_t size_bytes_ = 0;
};

}  // namespace pensieve::model
