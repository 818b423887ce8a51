// libFuzzer target: any bytes through the GGUF parser, then (when they parse)
// the model config, tensor views, shape and block checks and tokenizer
// reading; and the same bytes as one row of a quantised block type (chosen
// by the first byte, its claimed length by the second) through the block
// check and, when it passes, the dequantiser. Each must return an Error or a
// value; ASan/UBSan catch anything else.
#include "gpu/formats/gguf_file.hpp"
#include "gpu/formats/quant_block_check.hpp"
#include "gpu/kernels/cpu/dequant.hpp"
#include "gpu/model/gguf_loader.hpp"
#include "gpu/model/gguf_tokenizer.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

namespace {

// A truncated row (fewer bytes than its blocks) or a non-finite scale must be
// refused by check_quant_blocks before any decoder reads the row.
void fuzz_block_row(const std::vector<std::byte>& bytes) {
  using namespace pensieve::model;
  if (bytes.size() < 2) return;
  const DType t = all_dtypes[std::to_integer<std::size_t>(bytes[0]) % std::size(all_dtypes)];
  const std::int64_t block = dtype_block_elems(t);
  if (block == 1) return;
  const std::int64_t cols = block * (1 + std::to_integer<std::int64_t>(bytes[1]) % 8);
  std::vector<std::byte> row(bytes.begin() + 2, bytes.end());  // exactly its size, for ASan
  const Tensor tensor{"fuzz", t, {1, cols}, row.data(), row.size()};
  if (!check_quant_blocks(tensor)) return;
  std::vector<float> out(static_cast<std::size_t>(cols));
  pensieve::kernels::cpu::dequantize_row(t, row.data(), cols, out.data());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pensieve::model;
  // A private copy, so a read past `size` lands in ASan's redzone.
  std::vector<std::byte> bytes(size);
  if (size > 0) std::memcpy(bytes.data(), data, size);
  fuzz_block_row(bytes);
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
