#include "gpu/model/hf_loader.hpp"

#include "gpu/model/hf_config.hpp"
#include "gpu/model/model_loader_shapes.hpp"
#include "gpu/formats/safetensors_file.hpp"
#include "gpu/model/tokenizer_json.hpp"

#include <boost/json.hpp>

#include <set>
#include <unordered_map>

namespace pensieve::model {

namespace {

// Every shard of the checkpoint, and which tensor lives where.
struct Shards {
  std::vector<SafetensorsFile> files;
  std::unordered_map<std::string, const SafetensorsTensor*> by_name;
};

Result<std::vector<std::string>> shard_names(const std::filesystem::path& dir) {
  const auto index_path = dir / "model.safetensors.index.json";
  std::error_code ec;
  if (!std::filesystem::exists(index_path, ec)) return std::vector<std::string>{"model.safetensors"};
  auto text = read_text_file(index_path);
  if (!text) return text.error();
  boost::system::error_code jec;
  auto root = boost::json::parse(*text, jec);
  const boost::json::value* map = !jec && root.is_object() ? root.get_object().if_contains("weight_map") : nullptr;
  if (map == nullptr || !map->is_object()) return fail(index_path.string() + ": no weight_map object");
  std::set<std::string> names;
  for (const auto& [tensor, file] : map->get_object()) {
    if (!file.is_string()) return fail(index_path.string() + ": weight_map entry is not a file name");
    const std::string name(file.get_string());
    if (name.empty() || name.find('/') != std::string::npos || name.starts_with(".")) {
      return fail(index_path.string() + ": shard name '" + name + "' is not a plain file name");
    }
    names.insert(name);
  }
  return std::vector<std::string>(names.begin(), names.end());
}

Result<std::shared_ptr<Shards>> open_shards(const std::filesystem::path& dir) {
  auto names = shard_names(dir);
  if (!names) return names.error();
  auto shards = std::make_shared<Shards>();
  shards->files.reserve(names->size());  // pointers into files stay valid
  for (const auto& name : *names) {
    auto file = read_safetensors(dir / name);
    if (!file) return file.error();
    shards->files.push_back(std::move(*file));
    for (const auto& t : shards->files.back().tensors) {
      if (!shards->by_name.emplace(t.name, &t).second) {
        return fail((dir / name).string() + ": tensor " + t.name + " is also in another shard");
      }
    }
  }
  return shards;
}

Result<Tensor> view(const Shards& shards, const std::string& name, bool required, const std::string& label) {
  auto it = shards.by_name.find(name);
  if (it == shards.by_name.end()) {
    if (required) return fail(label + ": missing tensor " + name);
    return Tensor{};
  }
  const SafetensorsTensor& t = *it->second;
  if (!t.dtype) return fail(label + ": tensor " + name + " has dtype " + t.dtype_name + " (F32, F16 or BF16 expected)");
  return Tensor{name, *t.dtype, t.shape, t.data, t.size_bytes};
}

Result<void> fill_layers(ModelWeights& w, const Shards& shards, const std::string& label) {
  // Grown layer by layer: an absurd num_hidden_layers fails at the first
  // missing tensor instead of allocating first.
  const bool bias = w.config.qkv_bias;
  for (std::int32_t l = 0; l < w.config.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights& L = w.layers.emplace_back();
    const std::tuple<const char*, Tensor*, bool> names[] = {
        {"input_layernorm.weight", &L.attn_norm, true},  {"self_attn.q_proj.weight", &L.wq, true},
        {"self_attn.k_proj.weight", &L.wk, true},        {"self_attn.v_proj.weight", &L.wv, true},
        {"self_attn.o_proj.weight", &L.wo, true},        {"self_attn.q_proj.bias", &L.bq, bias},
        {"self_attn.k_proj.bias", &L.bk, bias},          {"self_attn.v_proj.bias", &L.bv, bias},
        {"post_attention_layernorm.weight", &L.ffn_norm, true}, {"mlp.gate_proj.weight", &L.w_gate, true},
        {"mlp.up_proj.weight", &L.w_up, true},           {"mlp.down_proj.weight", &L.w_down, true},
    };
    for (auto [name, out, required] : names) {
      auto t = view(shards, p + name, required, label);
      if (!t) return t.error();
      *out = std::move(*t);
    }
  }
  return {};
}

}  // namespace

Result<ModelWeights> load_hf_directory(const std::filesystem::path& dir) {
  const std::string label = dir.string();
  auto config = read_hf_config(dir / "config.json");
  if (!config) return config.error();
  auto shards = open_shards(dir);
  if (!shards) return shards.error();
  ModelWeights w;
  w.config = *config;
  w.storage = *shards;
  auto get = [&](const std::string& name, Tensor& out, bool required) -> Result<void> {
    auto t = view(**shards, name, required, label);
    if (!t) return t.error();
    out = std::move(*t);
    return {};
  };
  if (auto ok = get("model.embed_tokens.weight", w.token_embedding, true); !ok) return ok.error();
  if (auto ok = get("model.norm.weight", w.output_norm, true); !ok) return ok.error();
  if (auto ok = get("lm_head.weight", w.output, !w.config.tied_output); !ok) return ok.error();
  // Some tied checkpoints still ship lm_head; the embedding is what the model uses.
  if (w.config.tied_output) w.output = w.token_embedding;
  if (auto ok = fill_layers(w, **shards, label); !ok) return ok.error();
  if (auto ok = check_shapes(w); !ok) return fail(label + ": " + ok.error().message);
  std::error_code ec;
  if (std::filesystem::exists(dir / "tokenizer.json", ec)) {
    auto tok = read_hf_tokenizer(dir);
    if (!tok) return tok.error();
    w.tokenizer = std::move(*tok);
  }
  return w;
}

}  // namespace pensieve::model
