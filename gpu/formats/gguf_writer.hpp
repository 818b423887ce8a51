#pragma once
// Writes a GGUF v3 file: metadata in insertion order, then the tensor index,
// then the tensor data, each tensor aligned. Owns the tensor bytes until
// written. Single-threaded use.
#include "gpu/formats/gguf_value.hpp"
#include "gpu/formats/tensor.hpp"
#include "runtime/error.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace pensieve::model {

class GgufWriter {
 public:
  explicit GgufWriter(std::uint64_t alignment = 32) : alignment_(alignment) {}

  // Adds or replaces a metadata key (a replaced key keeps its position).
  void set(const std::string& key, GgufValue value);
  // `ne` in GGUF order (fastest dimension first); `data` must hold exactly the tensor's bytes.
  Result<void> add_tensor(std::string name, DType dtype, std::vector<std::int64_t> ne,
                          std::vector<std::byte> data);

  std::vector<std::byte> serialize() const;
  Result<void> write(const std::filesystem::path& path) const;

 private:
  struct PendingTensor {
    std::string name;
    DType dtype;
    std::vector<std::int64_t> ne;
    std::vector<std::byte> data;
  };
  std::vector<std::byte> header_and_index() const;

  std::uint64_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace pensieve::model
