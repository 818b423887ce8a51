#include "gpu/model/hf_export.hpp"

#include "gpu/formats/safetensors_writer.hpp"
#include "gpu/model/test_model.hpp"
#include "gpu/model/tokenizer_json_export.hpp"

#include <boost/json.hpp>

#include <cstring>
#include <fstream>

namespace pensieve::model {

std::vector<std::byte> interleaved_to_half_split_rows(const Tensor& t, std::int32_t n_heads) {
  const std::int64_t rows = t.shape.empty() ? 0 : t.shape[0];
  const std::size_t row_bytes = rows > 0 ? t.size_bytes / std::size_t(rows) : 0;
  const std::int64_t head_dim = rows / n_heads;
  std::vector<std::byte> out(t.size_bytes);
  for (std::int64_t h = 0; h < n_heads; ++h) {
    for (std::int64_t i = 0; i < head_dim / 2; ++i) {
      for (std::int64_t j = 0; j < 2; ++j) {
        const std::int64_t hf_row = h * head_dim + j * (head_dim / 2) + i;
        const std::int64_t gguf_row = h * head_dim + 2 * i + j;
        std::memcpy(out.data() + std::size_t(hf_row) * row_bytes, t.data + std::size_t(gguf_row) * row_bytes, row_bytes);
      }
    }
  }
  return out;
}

namespace {

Result<SafetensorsOut> convert(const Tensor& t, const std::string& name, std::vector<std::byte> bytes) {
  SafetensorsOut out{name, t.dtype, t.shape, std::move(bytes)};
  if (t.dtype == DType::f32 || t.dtype == DType::f16 || t.dtype == DType::bf16) return out;
  if (t.dtype != DType::q8_0) return fail(std::string("hf export: tensor ") + t.name + " is " + dtype_name(t.dtype));
  std::vector<float> values(std::size_t(t.numel()));
  dequantize_q8_0(out.data.data(), t.numel(), values.data());
  out.dtype = DType::f32;
  out.data.resize(values.size() * 4);
  std::memcpy(out.data.data(), values.data(), out.data.size());
  return out;
}

Result<void> add(std::vector<SafetensorsOut>& out, const Tensor& t, const std::string& name,
                 std::int32_t permute_heads = 0) {
  if (!t.present()) return {};
  std::vector<std::byte> bytes = permute_heads > 0 ? interleaved_to_half_split_rows(t, permute_heads)
                                                   : std::vector<std::byte>(t.data, t.data + t.size_bytes);
  auto converted = convert(t, name, std::move(bytes));
  if (!converted) return converted.error();
  out.push_back(std::move(*converted));
  return {};
}

std::string config_json(const ModelWeights& w) {
  const ModelConfig& c = w.config;
  boost::json::object o{
      {"architectures", boost::json::array{c.architecture == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
      {"model_type", c.architecture},
      {"hidden_size", c.dim},
      {"intermediate_size", c.ff_dim},
      {"num_hidden_layers", c.n_layers},
      {"num_attention_heads", c.n_heads},
      {"num_key_value_heads", c.n_kv_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_context},
      {"rms_norm_eps", c.rms_eps},
      {"rope_theta", c.rope_theta},
      {"vocab_size", c.vocab_size},
      {"tie_word_embeddings", c.tied_output},
      {"hidden_act", "silu"},
      {"torch_dtype", w.token_embedding.dtype == DType::f16 ? "float16" : "float32"},
  };
  if (w.tokenizer) {
    if (w.tokenizer->bos_id >= 0) o["bos_token_id"] = w.tokenizer->bos_id;
    if (w.tokenizer->eos_id >= 0) o["eos_token_id"] = w.tokenizer->eos_id;
  }
  if (c.rope_scaling.type == RopeScalingType::linear) {
    o["rope_scaling"] = boost::json::object{{"rope_type", "linear"}, {"factor", c.rope_scaling.factor}};
  }
  return boost::json::serialize(o);
}

Result<std::vector<SafetensorsOut>> collect(const ModelWeights& w) {
  const ModelConfig& c = w.config;
  if (c.rope_dims != c.head_dim) return fail("hf export: partial rotary models are not exported");
  if (w.rope_freqs.present()) return fail("hf export: rope frequency factors are not exported");
  const bool permute = c.rope_style == RopeStyle::interleaved;
  const std::int32_t qh = permute ? c.n_heads : 0, kh = permute ? c.n_kv_heads : 0;
  std::vector<SafetensorsOut> out;
  if (auto ok = add(out, w.token_embedding, "model.embed_tokens.weight"); !ok) return ok.error();
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::tuple<const Tensor*, const char*, std::int32_t> items[] = {
        {&L.attn_norm, "input_layernorm.weight", 0}, {&L.wq, "self_attn.q_proj.weight", qh},
        {&L.wk, "self_attn.k_proj.weight", kh},      {&L.wv, "self_attn.v_proj.weight", 0},
        {&L.wo, "self_attn.o_proj.weight", 0},       {&L.bq, "self_attn.q_proj.bias", qh},
        {&L.bk, "self_attn.k_proj.bias", kh},        {&L.bv, "self_attn.v_proj.bias", 0},
        {&L.ffn_norm, "post_attention_layernorm.weight", 0}, {&L.w_gate, "mlp.gate_proj.weight", 0},
        {&L.w_up, "mlp.up_proj.weight", 0},          {&L.w_down, "mlp.down_proj.weight", 0},
    };
    for (auto [t, name, heads] : items) {
      if (auto ok = add(out, *t, p + name, heads); !ok) return ok.error();
    }
  }
  if (auto ok = add(out, w.output_norm, "model.norm.weight"); !ok) return ok.error();
  if (!c.tied_output) {
    if (auto ok = add(out, w.output, "lm_head.weight"); !ok) return ok.error();
  }
  return out;
}

}  // namespace

Result<void> export_hf_directory(const ModelWeights& w, const std::filesystem::path& dir) {
  const ModelConfig& c = w.config;
  if ((c.architecture != "llama" && c.architecture != "qwen2") || c.sliding_window > 0 || w.rope_freqs.present()) {
    return fail("a Hugging Face export of a " + c.architecture +
                " model with these features is not supported (plain llama and qwen2 only)");
  }
  auto tensors = collect(w);
  if (!tensors) return tensors.error();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail(dir.string() + ": cannot create: " + ec.message());
  {
    std::ofstream cfg(dir / "config.json", std::ios::trunc);
    cfg << config_json(w) << "\n";
    if (!cfg) return fail((dir / "config.json").string() + ": write failed");
  }
  if (w.tokenizer) {
    if (auto ok = write_hf_tokenizer(*w.tokenizer, dir); !ok) return ok;
  }
  return write_safetensors(dir / "model.safetensors", *tensors, {{"format", "pt"}});
}

}  // namespace pensieve::model
