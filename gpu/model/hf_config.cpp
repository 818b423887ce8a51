#include "gpu/model/hf_config.hpp"

#include <boost/json.hpp>

#include <fstream>
#include <sstream>

namespace pensieve::model {

namespace json = boost::json;

namespace {

Error cfg_error(const std::string& label, const std::string& what) { return fail(label + ": config.json: " + what); }

Result<std::optional<std::int64_t>> get_int(const json::object& o, std::string_view key, const std::string& label) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || v->is_null()) return std::optional<std::int64_t>();
  if (v->is_int64()) return std::optional<std::int64_t>(v->get_int64());
  if (v->is_uint64() && v->get_uint64() <= std::uint64_t(INT64_MAX)) {
    return std::optional<std::int64_t>(std::int64_t(v->get_uint64()));
  }
  return cfg_error(label, std::string(key) + " is not an integer");
}

Result<std::optional<double>> get_number(const json::object& o, std::string_view key, const std::string& label) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || v->is_null()) return std::optional<double>();
  if (v->is_number()) return std::optional<double>(v->to_number<double>());
  return cfg_error(label, std::string(key) + " is not a number");
}

Result<void> read_dim(const json::object& o, std::string_view key, std::int32_t& out, bool required,
                      const std::string& label) {
  auto v = get_int(o, key, label);
  if (!v) return v.error();
  if (!*v) return required ? Result<void>(cfg_error(label, "missing " + std::string(key))) : Result<void>();
  if (**v <= 0 || **v > (std::int64_t(1) << 30)) {
    return cfg_error(label, std::string(key) + " = " + std::to_string(**v) + " is out of range");
  }
  out = std::int32_t(**v);
  return {};
}

Result<void> read_architecture(const json::object& o, ModelConfig& c, const std::string& label) {
  std::string type;
  if (const json::value* v = o.if_contains("model_type"); v && v->is_string()) type = std::string(v->get_string());
  if (type.empty()) {
    const json::value* archs = o.if_contains("architectures");
    if (archs && archs->is_array() && !archs->get_array().empty() && archs->get_array()[0].is_string()) {
      const std::string a(archs->get_array()[0].get_string());
      type = a == "Qwen2ForCausalLM" ? "qwen2" : a == "MistralForCausalLM" ? "mistral" : a == "LlamaForCausalLM" ? "llama" : a;
    }
  }
  if (type == "llama" || type == "mistral") {
    c.architecture = "llama";
    if (const json::value* b = o.if_contains("attention_bias"); b && b->is_bool()) c.qkv_bias = b->get_bool();
  } else if (type == "qwen2") {
    c.architecture = "qwen2";
    c.qkv_bias = true;
  } else {
    return cfg_error(label, "model type '" + type + "' is not supported (llama, mistral, qwen2)");
  }
  c.name = type;
  return {};
}

Result<void> read_rope_scaling(const json::object& o, ModelConfig& c, const std::string& label) {
  const json::value* v = o.if_contains("rope_scaling");
  if (v == nullptr || v->is_null()) return {};
  if (!v->is_object()) return cfg_error(label, "rope_scaling is not an object");
  const json::object& rs = v->get_object();
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (const json::value* t = rs.if_contains(key); t && t->is_string()) type = std::string(t->get_string());
  }
  auto factor = get_number(rs, "factor", label);
  if (!factor) return factor.error();
  c.rope_scaling.factor = float(factor->value_or(1.0));
  if (!(c.rope_scaling.factor > 0.0f)) return cfg_error(label, "rope_scaling.factor must be positive");
  if (type == "default") return {};
  if (type == "linear") {
    c.rope_scaling.type = RopeScalingType::linear;
  } else if (type == "llama3") {
    c.rope_scaling.type = RopeScalingType::llama3;
    auto low = get_number(rs, "low_freq_factor", label);
    auto high = get_number(rs, "high_freq_factor", label);
    if (!low) return low.error();
    if (!high) return high.error();
    c.rope_scaling.low_freq_factor = float(low->value_or(1.0));
    c.rope_scaling.high_freq_factor = float(high->value_or(4.0));
  } else {
    return cfg_error(label, "rope scaling '" + type + "' is not supported (linear, llama3)");
  }
  auto original = get_int(rs, "original_max_position_embeddings", label);
  if (!original) return original.error();
  if (*original && **original > 0 && **original < INT32_MAX) c.rope_scaling.original_context = std::int32_t(**original);
  return {};
}

Result<void> read_dims(const json::object& o, ModelConfig& c, const std::string& label) {
  const std::pair<const char*, std::int32_t*> required[] = {
      {"hidden_size", &c.dim}, {"intermediate_size", &c.ff_dim}, {"num_hidden_layers", &c.n_layers},
      {"num_attention_heads", &c.n_heads}, {"vocab_size", &c.vocab_size},
  };
  for (auto [key, out] : required) {
    if (auto ok = read_dim(o, key, *out, true, label); !ok) return ok;
  }
  c.n_kv_heads = c.n_heads;
  if (auto ok = read_dim(o, "num_key_value_heads", c.n_kv_heads, false, label); !ok) return ok;
  if (c.dim % c.n_heads != 0 && !o.if_contains("head_dim")) {
    return cfg_error(label, "hidden_size is not a multiple of num_attention_heads");
  }
  c.head_dim = c.dim / c.n_heads;
  if (auto ok = read_dim(o, "head_dim", c.head_dim, false, label); !ok) return ok;
  if (c.n_heads % c.n_kv_heads != 0) return cfg_error(label, "num_attention_heads is not a multiple of num_key_value_heads");
  if (c.head_dim % 2 != 0) return cfg_error(label, "head_dim must be even");
  c.rope_dims = c.head_dim;
  return read_dim(o, "max_position_embeddings", c.max_context, false, label);
}

}  // namespace

Result<ModelConfig> parse_hf_config(std::string_view json_text, const std::string& label) {
  boost::system::error_code ec;
  json::value root = json::parse(json_text, ec);
  if (ec) return cfg_error(label, "not JSON: " + ec.message());
  if (!root.is_object()) return cfg_error(label, "not a JSON object");
  const json::object& o = root.get_object();
  ModelConfig c;
  c.rope_style = RopeStyle::half_split;
  if (auto ok = read_architecture(o, c, label); !ok) return ok.error();
  if (auto ok = read_dims(o, c, label); !ok) return ok.error();
  auto eps = get_number(o, "rms_norm_eps", label);
  auto theta = get_number(o, "rope_theta", label);
  if (!eps) return eps.error();
  if (!theta) return theta.error();
  c.rms_eps = float(eps->value_or(1e-6));
  c.rope_theta = float(theta->value_or(10000.0));
  if (!(c.rms_eps > 0.0f) || !(c.rope_theta > 0.0f)) return cfg_error(label, "rms_norm_eps and rope_theta must be positive");
  if (auto ok = read_rope_scaling(o, c, label); !ok) return ok.error();
  if (const json::value* tie = o.if_contains("tie_word_embeddings"); tie && tie->is_bool()) {
    c.tied_output = tie->get_bool();
  }
  // Mistral 7B v0.1's 4096-token window (later Mistrals say null): honoured
  // on every layer. Qwen2's sliding_window only counts with use_sliding_window,
  // which no released model sets: not read.
  if (c.name == "mistral") {
    if (auto ok = read_dim(o, "sliding_window", c.sliding_window, false, label); !ok) return ok.error();
  }
  return c;
}

Result<std::string> read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path.string() + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return fail(path.string() + ": read failed");
  return Result<std::string>(boost::system::in_place_value, std::move(text).str());
}

Result<ModelConfig> read_hf_config(const std::filesystem::path& config_json) {
  auto text = read_text_file(config_json);
  if (!text) return text.error();
  return parse_hf_config(*text, config_json.string());
}

}  // namespace pensieve::model
