#include "gpu/model/model_loader.hpp"

#include "gpu/formats/gguf_file.hpp"
#include "gpu/model/gguf_loader.hpp"
#include "gpu/model/hf_loader.hpp"
#include "gpu/model/llama2c_loader.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <string>

namespace pensieve::model {

const char* model_format_name(ModelFormat f) {
  switch (f) {
    case ModelFormat::gguf: return "GGUF";
    case ModelFormat::hf_directory: return "Hugging Face directory";
    case ModelFormat::llama2c: return "llama2.c checkpoint";
  }
  return "?";
}

Result<ModelFormat> detect_model_format(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    if (std::filesystem::exists(path / "config.json", ec)) return ModelFormat::hf_directory;
    return fail(path.string() + ": a directory without config.json is not a model");
  }
  if (!std::filesystem::is_regular_file(path, ec)) return fail(path.string() + ": no such model file");
  std::ifstream in(path, std::ios::binary);
  std::array<char, 4> magic{};
  in.read(magic.data(), magic.size());
  if (!in) return fail(path.string() + ": too short to be a model file");
  if (looks_like_gguf(std::as_bytes(std::span(magic)))) return ModelFormat::gguf;
  // A file named .gguf without the magic is not a llama2.c checkpoint: most
  // often a download or a llama-quantize run that stopped before writing its
  // header (zeros where the header goes), which the llama2.c reader would
  // report as a header of absurd sizes.
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  if (ext == ".gguf") {
    char bytes[16];
    std::snprintf(bytes, sizeof bytes, "%02x %02x %02x %02x", static_cast<unsigned char>(magic[0]),
                  static_cast<unsigned char>(magic[1]), static_cast<unsigned char>(magic[2]),
                  static_cast<unsigned char>(magic[3]));
    return fail(path.string() + ": not a GGUF file: it begins with the bytes " + bytes +
                ", not \"GGUF\" (a download or a conversion that did not finish?)");
  }
  return ModelFormat::llama2c;
}

Result<ModelWeights> load_model(const std::filesystem::path& path) {
  auto format = detect_model_format(path);
  if (!format) return format.error();
  switch (*format) {
    case ModelFormat::gguf: return load_gguf(path);
    case ModelFormat::hf_directory: return load_hf_directory(path);
    case ModelFormat::llama2c: return load_llama2c(path);
  }
  return fail(path.string() + ": unknown model format");
}

}  // namespace pensieve::model
