#pragma once
// A parsed GGUF file (versions 2 and 3, little-endian): its metadata in file
// order, its tensor index, and views of the tensor bytes in the mapped file.
// Every count, length, offset and size is checked against the file before it
// is used, so a malformed file is an Error, never an out-of-bounds read.
// Immutable after parsing; safe to read from any thread.
#include "gpu/formats/gguf_value.hpp"
#include "gpu/formats/tensor.hpp"
#include "runtime/error.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pensieve::model {

inline constexpr std::uint32_t gguf_magic = 0x46554747;  // "GGUF" read as little-endian u32
inline constexpr std::uint64_t gguf_default_alignment = 32;
inline constexpr std::size_t gguf_max_dims = 4;

// ggml's numbering of the tensor types this engine reads.
enum class GgmlType : std::uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q2_k = 10, q3_k = 11,
  q4_k = 12, q5_k = 13, q6_k = 14, iq4_nl = 20, iq4_xs = 23, bf16 = 30,
};
std::optional<DType> dtype_from_ggml(std::uint32_t ggml_type);
// ggml's name of a type number ("IQ2_XXS", "Q8_K", ...), or "" for a number
// ggml does not define: an error names what a file holds.
const char* ggml_type_name(std::uint32_t ggml_type);
GgmlType ggml_from_dtype(DType t);

struct GgufTensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> ne;  // GGUF order: ne[0] is the fastest-varying dimension
  std::uint64_t offset = 0;      // from the start of the data section
  std::size_t size_bytes = 0;
  const std::byte* data = nullptr;  // inside GgufFile::storage

  // Row-major (numpy) shape: ne reversed.
  std::vector<std::int64_t> shape() const { return {ne.rbegin(), ne.rend()}; }
};

struct GgufFile {
  std::string label;  // the path, for error messages
  std::uint32_t version = 0;
  std::uint64_t alignment = gguf_default_alignment;
  std::uint64_t data_offset = 0;  // file offset of the tensor data section
  std::vector<std::pair<std::string, GgufValue>> metadata;  // in file order
  std::vector<GgufTensorInfo> tensors;                      // in file order
  std::shared_ptr<const void> storage;                      // keeps `data` views valid

  const GgufValue* find(std::string_view key) const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;

  // Typed metadata lookups; an Error names the key when it is present with the wrong type.
  Result<std::optional<std::int64_t>> get_int(std::string_view key) const;
  Result<std::optional<double>> get_number(std::string_view key) const;
  Result<std::optional<bool>> get_bool(std::string_view key) const;
  Result<std::optional<std::string>> get_string(std::string_view key) const;

  std::unordered_map<std::string, std::size_t> key_index_;     // -> metadata
  std::unordered_map<std::string, std::size_t> tensor_index_;  // -> tensors
};

// Parses `bytes` (the whole file). Tensor views point into `bytes`, which must
// outlive the result (parse_gguf does not take ownership; read_gguf does).
// `label` names the file in error messages.
Result<GgufFile> parse_gguf(std::span<const std::byte> bytes, std::string label);

// Maps `path` and parses it; the result owns the mapping.
Result<GgufFile> read_gguf(const std::filesystem::path& path);

// True when the file starts with the GGUF magic (a cheap sniff for dispatch).
bool looks_like_gguf(std::span<const std::byte> first_bytes);

}  // namespace pensieve::model
