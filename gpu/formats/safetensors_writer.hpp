#pragma once
// Writes a .safetensors file from tensors held in memory (F32/F16/BF16).
#include "gpu/formats/tensor.hpp"
#include "runtime/error.hpp"

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace pensieve::model {

struct SafetensorsOut {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;  // row-major
  std::vector<std::byte> data;
};

// The header is padded with spaces so the data starts 8-byte aligned.
std::vector<std::byte> serialize_safetensors(const std::vector<SafetensorsOut>& tensors,
                                             const std::map<std::string, std::string>& metadata);
Result<void> write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsOut>& tensors,
                               const std::map<std::string, std::string>& metadata);

}  // namespace pensieve::model
