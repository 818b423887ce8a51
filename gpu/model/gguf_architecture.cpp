#include "gpu/model/gguf_architecture.hpp"

#include <cmath>

namespace pensieve::model {

namespace {

Error arch_error(const GgufFile& file, const std::string& what) {
  return fail(file.label + ": GGUF model: " + what);
}

// An optional number; `out` keeps its default when the key is absent.
Result<void> optional_float(const GgufFile& file, const std::string& key, float& out) {
  auto v = file.get_number(key);
  if (!v) return v.error();
  if (*v) out = float(**v);
  return {};
}

Result<void> optional_window(const GgufFile& file, const std::string& key, std::int32_t& out) {
  auto v = file.get_int(key);
  if (!v) return v.error();
  if (!*v) return {};
  if (**v < 0 || **v > (std::int64_t(1) << 30)) {
    return arch_error(file, key + " = " + std::to_string(**v) + " is out of range");
  }
  out = std::int32_t(**v);
  return {};
}

bool is_gemma(const std::string& arch) { return arch == "gemma2" || arch == "gemma3"; }

}  // namespace

Result<void> architecture_features(const GgufFile& file, ModelConfig& c) {
  const std::string& a = c.architecture;
  if (a == "llama") {
    // llama.cpp's converter permutes llama's Q/K rows for its "normal" rope.
    c.rope_style = RopeStyle::interleaved;
  } else if (a == "qwen2") {
    c.rope_style = RopeStyle::half_split;
    c.qkv_bias = true;
  } else if (a == "qwen3") {
    c.rope_style = RopeStyle::half_split;
    c.qk_norm = true;
  } else if (a == "phi3") {
    c.rope_style = RopeStyle::half_split;
  } else if (a == "gemma2" || a == "gemma3") {
    c.rope_style = RopeStyle::half_split;
    c.post_norms = true;
    c.ffn_activation = FfnActivation::gelu_tanh;
    c.qk_norm = a == "gemma3";
    // llama.cpp's Gemma layers: every other one windowed (gemma2), five in
    // six (gemma3); its defaults where the file has no key.
    c.sliding_window_pattern = a == "gemma2" ? 2 : 6;
  } else {
    return arch_error(file, "architecture '" + a + "' is not supported (" + supported_gguf_architectures + ")");
  }
  return {};
}

Result<void> architecture_keys(const GgufFile& file, ModelConfig& c) {
  const std::string& a = c.architecture;
  if (auto ok = optional_float(file, a + ".rope.scaling.attn_factor", c.rope_scaling.attn_factor); !ok) {
    return ok.error();
  }
  if (!(c.rope_scaling.attn_factor > 0.0f) || !std::isfinite(c.rope_scaling.attn_factor)) {
    return arch_error(file, a + ".rope.scaling.attn_factor must be positive");
  }
  if (a == "gemma2") c.sliding_window = 4096;  // llama.cpp's default for files without the key
  // Mistral's files are `llama` ones; with the key (Mistral 7B v0.1: 4096)
  // the window is honoured on every layer, as in the reference model. Qwen
  // files may carry a window their models do not use (use_sliding_window
  // false): ignored, as llama.cpp does.
  if (a != "qwen2" && a != "qwen3") {
    if (auto ok = optional_window(file, a + ".attention.sliding_window", c.sliding_window); !ok) return ok.error();
  }
  if (a == "gemma3") c.rope_theta_windowed = c.sliding_window > 0 ? 10000.0f : 0.0f;
  if (!is_gemma(a)) return {};
  c.embedding_scale = std::sqrt(float(c.dim));
  // Gemma 27B scales q by 1/sqrt(dim / heads), the others by 1/sqrt(head_dim)
  // (llama.cpp tells them apart by the layer count, as here).
  const bool is_27b = (a == "gemma2" && c.n_layers == 46) || (a == "gemma3" && c.n_layers == 62);
  c.attention_scale = 1.0f / std::sqrt(float(is_27b ? c.dim / c.n_heads : c.head_dim));
  if (a == "gemma2") {
    c.attn_logit_softcap = 50.0f;  // llama.cpp's defaults
    c.final_logit_softcap = 30.0f;
  }
  if (auto ok = optional_float(file, a + ".attn_logit_softcapping", c.attn_logit_softcap); !ok) return ok.error();
  if (auto ok = optional_float(file, a + ".final_logit_softcapping", c.final_logit_softcap); !ok) return ok.error();
  // Gemma 3 has no attention cap; llama.cpp applies a final cap only to a
  // Gemma 3 without windows (its non-SWA graph), so the same here.
  if (a == "gemma3") {
    c.attn_logit_softcap = 0.0f;
    if (c.sliding_window > 0) c.final_logit_softcap = 0.0f;
  }
  if (c.attn_logit_softcap < 0.0f || c.final_logit_softcap < 0.0f || !std::isfinite(c.attn_logit_softcap) ||
      !std::isfinite(c.final_logit_softcap)) {
    return arch_error(file, "soft-capping values must be finite and not negative");
  }
  return {};
}

}  // namespace pensieve::model
