#include "gpu/model/gguf_loader.hpp"

#include "gpu/model/gguf_architecture.hpp"
#include "gpu/model/gguf_tokenizer.hpp"
#include "gpu/model/model_loader_shapes.hpp"

#include <algorithm>

namespace pensieve::model {

namespace {

Error config_error(const GgufFile& file, const std::string& what) {
  return fail(file.label + ": GGUF model: " + what);
}

// Reads an integer hyper-parameter into `out`; `required` ones must be there and positive.
Result<void> read_dim(const GgufFile& file, const std::string& key, std::int32_t& out, bool required) {
  auto v = file.get_int(key);
  if (!v) return v.error();
  if (!*v) {
    if (required) return config_error(file, "missing " + key);
    return {};
  }
  if (**v <= 0 || **v > (std::int64_t(1) << 30)) {
    return config_error(file, key + " = " + std::to_string(**v) + " is out of range");
  }
  out = std::int32_t(**v);
  return {};
}

Result<void> read_float(const GgufFile& file, const std::string& key, float& out) {
  auto v = file.get_number(key);
  if (!v) return v.error();
  if (*v) out = float(**v);
  return {};
}

Result<void> read_rope_scaling(const GgufFile& file, const std::string& arch, ModelConfig& c) {
  auto type = file.get_string(arch + ".rope.scaling.type");
  if (!type) return type.error();
  float factor = 1.0f;
  if (auto ok = read_float(file, arch + ".rope.scaling.factor", factor); !ok) return ok.error();
  if (auto ok = read_float(file, arch + ".rope.scale_linear", factor); !ok) return ok.error();  // older files
  const std::string kind = type->value_or(factor != 1.0f ? "linear" : "none");
  std::int32_t original = 0;
  if (auto ok = read_dim(file, arch + ".rope.scaling.original_context_length", original, false); !ok) {
    return ok.error();
  }
  if (original > 0) c.rope_scaling.original_context = original;
  // Phi-3's longrope is its rope_factors_* tensors and attn_factor (read
  // with the weights and the architecture's keys), not a frequency factor.
  if (kind == "none" || kind == "longrope") return {};
  if (kind != "linear") {
    return config_error(file, "rope scaling '" + kind + "' is not supported (none, linear, longrope)");
  }
  if (!(factor > 0.0f)) return config_error(file, "rope scaling factor must be positive");
  c.rope_scaling.type = RopeScalingType::linear;
  c.rope_scaling.factor = factor;
  return {};
}

Result<void> read_shape_keys(const GgufFile& file, const std::string& arch, ModelConfig& c) {
  const std::pair<std::string, std::int32_t*> required[] = {
      {".block_count", &c.n_layers}, {".embedding_length", &c.dim},
      {".attention.head_count", &c.n_heads}, {".feed_forward_length", &c.ff_dim},
  };
  for (auto& [suffix, out] : required) {
    if (auto ok = read_dim(file, arch + suffix, *out, true); !ok) return ok.error();
  }
  c.n_kv_heads = c.n_heads;
  if (auto ok = read_dim(file, arch + ".attention.head_count_kv", c.n_kv_heads, false); !ok) return ok.error();
  if (c.dim % c.n_heads != 0) return config_error(file, "embedding_length is not a multiple of head_count");
  c.head_dim = c.dim / c.n_heads;
  if (auto ok = read_dim(file, arch + ".attention.key_length", c.head_dim, false); !ok) return ok.error();
  if (c.n_heads % c.n_kv_heads != 0) return config_error(file, "head_count is not a multiple of head_count_kv");
  if (auto ok = read_dim(file, arch + ".context_length", c.max_context, false); !ok) return ok.error();
  c.rope_dims = c.head_dim;
  if (auto ok = read_dim(file, arch + ".rope.dimension_count", c.rope_dims, false); !ok) return ok.error();
  if (c.rope_dims > c.head_dim || c.rope_dims % 2 != 0) {
    return config_error(file, "rope.dimension_count " + std::to_string(c.rope_dims) + " does not fit head_dim " +
                                  std::to_string(c.head_dim));
  }
  return {};
}

// Vocabulary size: the token list, else <arch>.vocab_size, else the embedding rows.
Result<void> read_vocab_size(const GgufFile& file, const std::string& arch, ModelConfig& c) {
  if (const GgufValue* tokens = file.find("tokenizer.ggml.tokens"); tokens && tokens->type == GgufType::array) {
    c.vocab_size = std::int32_t(std::min<std::uint64_t>(tokens->count, INT32_MAX));
    return {};
  }
  if (auto ok = read_dim(file, arch + ".vocab_size", c.vocab_size, false); !ok) return ok.error();
  if (c.vocab_size > 0) return {};
  const GgufTensorInfo* embd = file.find_tensor("token_embd.weight");
  if (embd == nullptr || embd->ne.size() != 2) return config_error(file, "cannot tell the vocabulary size");
  c.vocab_size = std::int32_t(std::min<std::int64_t>(embd->ne[1], INT32_MAX));
  return {};
}

Result<Tensor> tensor_view(const GgufFile& file, const std::string& name, bool required) {
  const GgufTensorInfo* info = file.find_tensor(name);
  if (info == nullptr) {
    if (required) return config_error(file, "missing tensor " + name);
    return Tensor{};
  }
  return Tensor{name, info->dtype, info->shape(), info->data, info->size_bytes};
}

// Rows [begin, begin + count) of a matrix: a view into the same bytes.
Result<Tensor> rows_of(const GgufFile& file, const Tensor& t, std::int64_t begin, std::int64_t count,
                       const std::string& name) {
  if (t.shape.size() != 2 || begin + count > t.rows()) {
    return config_error(file, "tensor " + t.name + " has too few rows to hold " + name);
  }
  const std::size_t row_bytes = dtype_row_bytes(t.dtype, t.cols());
  Tensor s = t;
  s.name = t.name + " (" + name + ")";
  s.shape = {count, t.cols()};
  s.data = t.data + std::size_t(begin) * row_bytes;
  s.size_bytes = std::size_t(count) * row_bytes;
  return s;
}

// The divisors of the rope frequencies: Llama 3.1's rope_freqs, or Phi-3's
// longrope factors, the long ones when the model serves a context longer
// than the one it was trained at (llama.cpp's choice for n_ctx above
// rope.scaling.original_context_length; chosen once, for every sequence).
Result<void> rope_divisors(const GgufFile& file, const ModelConfig& c, Tensor& out) {
  if (auto t = tensor_view(file, "rope_freqs.weight", false); !t) {
    return t.error();
  } else if (t->present()) {
    out = std::move(*t);
    return {};
  }
  auto original = file.get_int(c.architecture + ".rope.scaling.original_context_length");
  if (!original) return original.error();
  const bool long_context = *original && c.max_context > **original;
  auto t = tensor_view(file, long_context ? "rope_factors_long.weight" : "rope_factors_short.weight", false);
  if (!t) return t.error();
  out = std::move(*t);
  return {};
}

Result<LayerWeights> layer_weights(const GgufFile& file, const ModelConfig& c, const std::string& p) {
  LayerWeights L;
  auto get = [&](const std::string& name, Tensor& out, bool required) -> Result<void> {
    auto t = tensor_view(file, p + name, required);
    if (!t) return t.error();
    out = std::move(*t);
    return {};
  };
  const std::pair<const char*, Tensor*> always[] = {
      {"attn_norm.weight", &L.attn_norm}, {"attn_output.weight", &L.wo},
      {"ffn_norm.weight", &L.ffn_norm},   {"ffn_down.weight", &L.w_down},
  };
  for (auto [name, out] : always) {
    if (auto ok = get(name, *out, true); !ok) return ok.error();
  }
  // Phi-3 fuses q, k and v into attn_qkv (rows q, then k, then v).
  Tensor qkv;
  if (auto ok = get("attn_qkv.weight", qkv, false); !ok) return ok.error();
  if (qkv.present()) {
    auto q = rows_of(file, qkv, 0, c.q_dim(), "q");
    auto k = rows_of(file, qkv, c.q_dim(), c.kv_dim(), "k");
    auto v = rows_of(file, qkv, std::int64_t(c.q_dim()) + c.kv_dim(), c.kv_dim(), "v");
    if (!q) return q.error();
    if (!k) return k.error();
    if (!v) return v.error();
    if (qkv.rows() != std::int64_t(c.q_dim()) + 2 * c.kv_dim()) {
      return config_error(file, "tensor " + qkv.name + " has " + std::to_string(qkv.rows()) +
                                    " rows, not q + 2 kv = " + std::to_string(c.q_dim() + 2 * c.kv_dim()));
    }
    L.wq = std::move(*q);
    L.wk = std::move(*k);
    L.wv = std::move(*v);
  } else {
    for (auto [name, out] : {std::pair{"attn_q.weight", &L.wq}, {"attn_k.weight", &L.wk}, {"attn_v.weight", &L.wv}}) {
      if (auto ok = get(name, *out, true); !ok) return ok.error();
    }
  }
  if (auto ok = get("ffn_up.weight", L.w_up, true); !ok) return ok.error();
  if (auto ok = get("ffn_gate.weight", L.w_gate, c.architecture != "phi3"); !ok) return ok.error();
  if (!L.w_gate.present()) {
    // Phi-3's ffn_up holds the gate's rows, then the up projection's.
    const Tensor fused = L.w_up;
    if (fused.rows() != 2 * std::int64_t(c.ff_dim)) {
      return config_error(file, "tensor " + fused.name + " has " + std::to_string(fused.rows()) +
                                    " rows, not gate + up = " + std::to_string(2 * c.ff_dim));
    }
    auto gate = rows_of(file, fused, 0, c.ff_dim, "gate");
    auto up = rows_of(file, fused, c.ff_dim, c.ff_dim, "up");
    if (!gate) return gate.error();
    if (!up) return up.error();
    L.w_gate = std::move(*gate);
    L.w_up = std::move(*up);
  }
  const bool bias = c.qkv_bias;
  if (auto ok = get("attn_q.bias", L.bq, bias); !ok) return ok.error();
  if (auto ok = get("attn_k.bias", L.bk, bias); !ok) return ok.error();
  if (auto ok = get("attn_v.bias", L.bv, bias); !ok) return ok.error();
  if (c.qk_norm) {
    if (auto ok = get("attn_q_norm.weight", L.q_norm, true); !ok) return ok.error();
    if (auto ok = get("attn_k_norm.weight", L.k_norm, true); !ok) return ok.error();
  }
  if (c.post_norms) {
    if (auto ok = get("post_attention_norm.weight", L.post_attn_norm, true); !ok) return ok.error();
    if (auto ok = get("post_ffw_norm.weight", L.post_ffn_norm, true); !ok) return ok.error();
  }
  return L;
}

}  // namespace

Result<ModelConfig> config_from_gguf(const GgufFile& file) {
  auto arch = file.get_string("general.architecture");
  if (!arch) return arch.error();
  if (!*arch) return config_error(file, "general.architecture is missing");
  ModelConfig c;
  c.architecture = **arch;
  if (auto ok = architecture_features(file, c); !ok) return ok.error();
  auto name = file.get_string("general.name");
  if (!name) return name.error();
  c.name = name->value_or("");
  if (auto ok = read_shape_keys(file, c.architecture, c); !ok) return ok.error();
  if (auto ok = read_float(file, c.architecture + ".attention.layer_norm_rms_epsilon", c.rms_eps); !ok) {
    return ok.error();
  }
  if (auto ok = read_float(file, c.architecture + ".rope.freq_base", c.rope_theta); !ok) return ok.error();
  if (!(c.rms_eps > 0.0f) || !(c.rope_theta > 0.0f)) {
    return config_error(file, "rms epsilon and rope freq_base must be positive");
  }
  if (auto ok = read_rope_scaling(file, c.architecture, c); !ok) return ok.error();
  if (auto ok = architecture_keys(file, c); !ok) return ok.error();
  if (auto ok = read_vocab_size(file, c.architecture, c); !ok) return ok.error();
  c.tied_output = file.find_tensor("output.weight") == nullptr;
  return c;
}

Result<ModelWeights> weights_from_gguf(const GgufFile& file) {
  auto config = config_from_gguf(file);
  if (!config) return config.error();
  ModelWeights w;
  w.config = *config;
  w.storage = file.storage;
  auto get = [&](const std::string& name, Tensor& out, bool required) -> Result<void> {
    auto t = tensor_view(file, name, required);
    if (!t) return t.error();
    out = std::move(*t);
    return {};
  };
  const ModelConfig& c = w.config;
  if (auto ok = get("token_embd.weight", w.token_embedding, true); !ok) return ok.error();
  if (auto ok = get("output_norm.weight", w.output_norm, true); !ok) return ok.error();
  if (auto ok = get("output.weight", w.output, false); !ok) return ok.error();
  if (auto ok = rope_divisors(file, c, w.rope_freqs); !ok) return ok.error();
  if (w.config.tied_output) w.output = w.token_embedding;
  // Bounded by the tensors present: an absurd block_count must not allocate
  // before the first missing layer tensor is reported (found by fuzzing).
  w.layers.reserve(std::min(std::size_t(c.n_layers), file.tensors.size()));
  for (std::int32_t l = 0; l < c.n_layers; ++l) {
    auto layer = layer_weights(file, c, "blk." + std::to_string(l) + ".");
    if (!layer) return layer.error();
    w.layers.push_back(std::move(*layer));
  }
  if (auto ok = check_shapes(w); !ok) return fail(file.label + ": " + ok.error().message);
  if (gguf_has_tokenizer(file)) {
    auto tok = tokenizer_from_gguf(file);
    if (!tok) return tok.error();
    w.tokenizer = std::move(*tok);
  }
  return w;
}

Result<ModelWeights> load_gguf(const std::filesystem::path& path) {
  auto file = read_gguf(path);
  if (!file) return file.error();
  return weights_from_gguf(*file);
}

}  // namespace pensieve::model
