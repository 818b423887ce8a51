#pragma once
// A parsed .safetensors file: an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}}, then the raw tensor bytes.
// Every offset and size is checked against the file and the shape before use.
// Immutable after parsing; safe to read from any thread.
#include "gpu/formats/tensor.hpp"
#include "runtime/error.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pensieve::model {

inline constexpr std::uint64_t safetensors_max_header_bytes = 100u << 20;  // the format's own limit

struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;       // as in the file: "F32", "BF16", "I64", ...
  std::optional<DType> dtype;   // F32/F16/BF16; nullopt for types the engine does not compute in
  std::vector<std::int64_t> shape;  // row-major
  const std::byte* data = nullptr;
  std::size_t size_bytes = 0;
};

struct SafetensorsFile {
  std::string label;
  std::vector<SafetensorsTensor> tensors;  // in header order
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::shared_ptr<const void> storage;

  const SafetensorsTensor* find(std::string_view name) const;
  std::unordered_map<std::string, std::size_t> index_;
};

// Parses the whole file in `bytes` (which must outlive the result); `label`
// names it in errors.
Result<SafetensorsFile> parse_safetensors(std::span<const std::byte> bytes, std::string label);
Result<SafetensorsFile> read_safetensors(const std::filesystem::path& path);

}  // namespace pensieve::model
