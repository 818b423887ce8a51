// libFuzzer target: any bytes through the safetensors parser, and as text
// through the config.json and tokenizer.json readers. Each must return an
// Error or a value; ASan/UBSan catch anything else.
#include "gpu/model/hf_config.hpp"
#include "gpu/formats/safetensors_file.hpp"
#include "gpu/model/tokenizer_json.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pensieve::model;
  std::vector<std::byte> bytes(size);
  if (size > 0) std::memcpy(bytes.data(), data, size);
  if (auto file = parse_safetensors(bytes, "fuzz.safetensors")) {
    for (const auto& t : file->tensors) {
      volatile std::byte sink{};
      if (t.size_bytes > 0) sink = t.data[t.size_bytes - 1];  // every view must be inside the input
      (void)sink;
    }
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  (void)parse_hf_config(text, "fuzz/config.json");
  (void)parse_tokenizer_json(text, text, "fuzz/tokenizer.json");
  return 0;
}
