// libFuzzer target: any bytes through the GGUF parser, then (when they parse)
// the model config, tensor views, shape checks and tokenizer reading. Each
// must return an Error or a value; ASan/UBSan catch anything else.
#include "gpu/formats/gguf_file.hpp"
#include "gpu/model/gguf_loader.hpp"
#include "gpu/model/gguf_tokenizer.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pensieve::model;
  // A private copy, so a read past `size` lands in ASan's redzone.
  std::vector<std::byte> bytes(size);
  if (size > 0) std::memcpy(bytes.data(), data, size);
  auto file = parse_gguf(bytes, "fuzz.gguf");
  if (!file) return 0;
  for (const auto& t : file->tensors) {
    volatile std::byte sink{};
    if (t.size_bytes > 0) sink = t.data[t.size_bytes - 1];  // every view must be inside the input
    (void)sink;
  }
  if (auto w = weights_from_gguf(*file)) {
    volatile std::size_t n = w->layers.size();
    (void)n;
  }
  if (auto tok = tokenizer_from_gguf(*file)) {
    volatile std::size_t n = tok->tokens.size();
    (void)n;
  }
  return 0;
}
