#pragma once
// The project's fixture generator: a small GGUF of one of the supported
// architectures with deterministic random weights (the same seed gives the
// same bytes on every machine), the metadata keys and tensor names llama.cpp
// writes for that architecture, and a real vocabulary copied from a vocab
// GGUF. Its weights mean nothing; the file says so in general.description.
#include "gpu/model/model_weights.hpp"
#include "gpu/formats/tensor.hpp"
#include "runtime/error.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <vector>
#include <string>

namespace pensieve::model {

struct TestModelOptions {
  // llama (the default; the bytes it always wrote), llama3 (Llama 3.1:
  // rope_freqs from the llama3 recipe, untied), llama3.2 (the same, tied),
  // qwen3 (per-head q/k norms), mistral (a llama file with a sliding window),
  // phi3 (fused attn_qkv and gate+up ffn_up, longrope factors, a window on
  // every layer, untied), gemma2 (GeGLU, post-norms, soft-capping, windowed
  // even layers, tied), gemma3 (gemma2's layers with q/k norms, five windowed
  // layers in six with their own rope base, no soft-capping).
  std::string arch = "llama";
  std::int32_t head_dim = 0;         // 0: dim / heads (qwen3 and gemma may differ)
  std::int32_t sliding_window = -1;  // -1: 8 for mistral, phi3 and gemma, else none; 0: none
  float attn_softcap = -1.0f;        // gemma2; -1: 50 (the real models')
  float final_softcap = -1.0f;       // gemma2; -1: 30
  std::int32_t n_layers = 2;
  std::int32_t dim = 64;
  std::int32_t n_heads = 4;
  std::int32_t n_kv_heads = 2;
  std::int32_t ff_dim = 172;
  std::int32_t max_context = 2048;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  DType dtype = DType::f16;  // of every 2-D matrix: f32, f16 or q8_0; vectors stay F32
  std::uint64_t seed = 1;
  // Every tokenizer.* key of this GGUF is copied (the chat template included).
  std::optional<std::filesystem::path> vocab_from;
  std::int32_t vocab_size = 0;  // only without vocab_from: no tokenizer then
  std::optional<std::string> chat_template;  // replaces the vocabulary's
  // true: the output head is the token embedding (no output.weight); false:
  // a separate random output.weight {vocab, dim} in `dtype`, drawn after
  // every other tensor (so the shared tensors equal the tied model's).
  bool tied_output = true;
  std::string name = "pensieve-test-model";
};

// The --arch names make_test_model knows, for messages.
inline constexpr const char* test_model_architectures = "llama, llama3, llama3.2, qwen3, mistral, phi3, gemma2, gemma3";

// Checks the options (sizes positive, heads divide dim, q8_0 rows whole
// blocks, dtype supported, a known arch) and writes the model to `out`.
Result<void> make_test_model(const TestModelOptions& options, const std::filesystem::path& out);

// make_test_model into a fresh temporary folder (with the built-in
// vocabulary, builtin_vocab.hpp, when options.vocab_from is empty), loaded
// with load_model; the folder is removed either way (the loaded weights no
// longer need the file).
Result<ModelWeights> generate_test_model(TestModelOptions options);

// Deterministic random numbers that do not depend on the standard library's
// distributions: mt19937_64 bits through our own transforms.
class TestModelRng {
 public:
  explicit TestModelRng(std::uint64_t seed);
  double uniform();  // [0, 1)
  double normal();   // N(0, 1), Box-Muller
 private:
  std::mt19937_64 engine_;  // its output sequence is fixed by the C++ standard
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// Q8_0 (ggml's reference rounding): blocks of 32, f16 scale max|x|/127, round to nearest.
std::vector<std::byte> quantize_q8_0(const float* x, std::int64_t n);
void dequantize_q8_0(const std::byte* blocks, std::int64_t n, float* out);

}  // namespace pensieve::model
