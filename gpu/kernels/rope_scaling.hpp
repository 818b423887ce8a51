#pragma once
// How RoPE rotates a head: which dimensions pair up, and how long-context
// scaling bends the frequencies. Kernel parameters, so they live below the
// model that reads them from a file (model::ModelConfig names them too).
#include <cstdint>

namespace pensieve::kernels {

// Which pairs of a head's dimensions RoPE rotates together.
enum class RopeStyle : std::uint8_t {
  interleaved,  // (x[2i], x[2i+1]): llama2.c, GGUF "normal" (llama)
  half_split,   // (x[i], x[i + d/2]): Hugging Face rotate_half, GGUF "neox" (qwen2)
};

enum class RopeScalingType : std::uint8_t { none, linear, llama3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;   // llama3
  float high_freq_factor = 4.0f;  // llama3
  std::int32_t original_context = 8192;
  // cos and sin are multiplied by it, so q.k by its square (Phi-3 longrope's
  // GGUF rope.scaling.attn_factor; ggml's rope mscale).
  float attn_factor = 1.0f;
};

}  // namespace pensieve::kernels
