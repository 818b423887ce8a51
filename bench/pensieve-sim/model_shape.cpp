#include "bench/pensieve-sim/model_shape.hpp"

#include "gpu/formats/gguf_file.hpp"

#include <algorithm>

namespace pensieve::sim {

double ModelShape::matrix_params() const {
  const double q = double(n_heads) * head_dim, kv = double(n_kv_heads) * head_dim;
  const double attention = double(dim) * (q + 2.0 * kv) + q * dim;
  const double mlp = (gated_mlp ? 3.0 : 2.0) * double(dim) * ff_dim;
  return double(n_layers) * (attention + mlp) + double(vocab) * dim;
}

std::vector<std::string> model_presets() { return {"opt-13b", "llama-2-13b", "llama-2-70b", "llama-3-8b"}; }

Result<ModelShape> model_preset(const std::string& name) {
  // The published configurations (Hugging Face config.json of each model).
  ModelShape m;
  m.name = name;
  if (name == "opt-13b") {
    m.n_layers = 40, m.dim = 5120, m.n_heads = 40, m.n_kv_heads = 40, m.head_dim = 128, m.ff_dim = 20480;
    m.vocab = 50272, m.max_context = 2048, m.gated_mlp = false;
  } else if (name == "llama-2-13b") {
    m.n_layers = 40, m.dim = 5120, m.n_heads = 40, m.n_kv_heads = 40, m.head_dim = 128, m.ff_dim = 13824;
    m.vocab = 32000, m.max_context = 4096;
  } else if (name == "llama-2-70b") {
    m.n_layers = 80, m.dim = 8192, m.n_heads = 64, m.n_kv_heads = 8, m.head_dim = 128, m.ff_dim = 28672;
    m.vocab = 32000, m.max_context = 4096;
  } else if (name == "llama-3-8b") {
    m.n_layers = 32, m.dim = 4096, m.n_heads = 32, m.n_kv_heads = 8, m.head_dim = 128, m.ff_dim = 14336;
    m.vocab = 128256, m.max_context = 8192;
  } else {
    return fail("--model: '" + name + "' is not a preset (opt-13b, llama-2-13b, llama-2-70b, llama-3-8b) or a .gguf file");
  }
  return m;
}

Result<ModelShape> load_model_shape(const std::string& name_or_path) {
  if (name_or_path.size() < 5 || name_or_path.substr(name_or_path.size() - 5) != ".gguf") return model_preset(name_or_path);
  auto file = model::read_gguf(name_or_path);
  if (!file) return fail("--model " + name_or_path + ": " + file.error().message);
  auto arch = file->get_string("general.architecture");
  if (!arch) return arch.error();
  if (!*arch) return fail("--model " + name_or_path + ": no general.architecture");
  const std::string a = **arch;
  auto get = [&](const std::string& key, std::int64_t fallback) -> Result<std::int64_t> {
    auto v = file->get_int(a + "." + key);
    if (!v) return v.error();
    if (!*v) {
      if (fallback < 0) return fail("--model " + name_or_path + ": no " + a + "." + key);
      return fallback;
    }
    return **v;
  };
  ModelShape m;
  m.name = name_or_path;
  auto layers = get("block_count", -1), dim = get("embedding_length", -1), heads = get("attention.head_count", -1),
       ff = get("feed_forward_length", -1), ctx = get("context_length", 2048);
  for (auto* r : {&layers, &dim, &heads, &ff, &ctx}) {
    if (!*r) return r->error();
  }
  auto kv = get("attention.head_count_kv", *heads);
  if (!kv) return kv.error();
  auto head_dim = get("attention.key_length", *dim / std::max<std::int64_t>(*heads, 1));
  if (!head_dim) return head_dim.error();
  m.n_layers = std::int32_t(*layers), m.dim = std::int32_t(*dim), m.n_heads = std::int32_t(*heads);
  m.n_kv_heads = std::int32_t(*kv), m.head_dim = std::int32_t(*head_dim), m.ff_dim = std::int32_t(*ff);
  m.max_context = std::int32_t(*ctx);
  if (const model::GgufValue* tokens = file->find("tokenizer.ggml.tokens"); tokens && tokens->type == model::GgufType::array)
    m.vocab = std::int32_t(tokens->count);
  if (const model::GgufTensorInfo* out = file->find_tensor("output.weight"); out && m.vocab == 0 && out->ne.size() == 2)
    m.vocab = std::int32_t(out->ne[1]);
  if (m.n_layers <= 0 || m.dim <= 0 || m.n_heads <= 0 || m.n_kv_heads <= 0 || m.head_dim <= 0 || m.ff_dim <= 0)
    return fail("--model " + name_or_path + ": a shape key is not positive");
  return m;
}

}  // namespace pensieve::sim
