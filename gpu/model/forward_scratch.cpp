#include "gpu/model/forward_scratch.hpp"

#include "gpu/kernels/cpu/dequant.hpp"

#include <cmath>
#include <string>

namespace pensieve::model {

namespace {

std::string shape_string(const std::vector<std::int64_t>& s) {
  std::string out = "{";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "}";
}

Result<void> check(const Tensor& t, const char* what, std::vector<std::int64_t> want) {
  if (!t.present()) return fail(std::string("missing tensor ") + what);
  std::vector<std::int64_t> have = t.shape;
  if (want.size() == 1 && have.size() == 2 && have[0] == 1) have.erase(have.begin());
  if (have != want) {
    return fail(std::string(what) + " (" + t.name + ") has shape " + shape_string(t.shape) +
                ", the config needs " + shape_string(want));
  }
  if (t.dtype != DType::f32 && t.dtype != DType::f16 && t.dtype != DType::bf16 &&
      want.back() % dtype_block_elems(t.dtype) != 0) {
    return fail(std::string(what) + " row length is not a whole number of blocks");
  }
  if (t.size_bytes < std::size_t(t.rows()) * dtype_row_bytes(t.dtype, t.cols())) {
    return fail(std::string(what) + " (" + t.name + ") holds fewer bytes than its shape needs");
  }
  return {};
}

Result<std::vector<float>> vector_of(const Tensor& t, const char* what, std::int64_t n) {
  if (auto ok = check(t, what, {n}); !ok) return ok.error();
  return kernels::cpu::dequantize(t);
}

Result<PreparedLayer> prepare_layer(const LayerWeights& w, const ModelConfig& c) {
  PreparedLayer p;
  const std::int64_t dim = c.dim, q = c.q_dim(), kv = c.kv_dim(), ff = c.ff_dim;
  struct Matrix { const Tensor& t; const char* name; std::int64_t rows, cols; kernels::cpu::WeightView& out; };
  const Matrix matrices[] = {{w.wq, "wq", q, dim, p.wq},           {w.wk, "wk", kv, dim, p.wk},
                             {w.wv, "wv", kv, dim, p.wv},          {w.wo, "wo", dim, q, p.wo},
                             {w.w_gate, "w_gate", ff, dim, p.w_gate}, {w.w_up, "w_up", ff, dim, p.w_up},
                             {w.w_down, "w_down", dim, ff, p.w_down}};
  for (const auto& m : matrices) {
    if (auto ok = check(m.t, m.name, {m.rows, m.cols}); !ok) return ok.error();
    m.out = kernels::cpu::weight_view(m.t);
  }
  auto an = vector_of(w.attn_norm, "attn_norm", dim);
  if (!an) return an.error();
  auto fn = vector_of(w.ffn_norm, "ffn_norm", dim);
  if (!fn) return fn.error();
  p.attn_norm = std::move(*an);
  p.ffn_norm = std::move(*fn);
  const std::pair<const Tensor*, std::vector<float>*> optional[] = {
      {&w.q_norm, &p.q_norm}, {&w.k_norm, &p.k_norm}, {&w.post_attn_norm, &p.post_attn_norm},
      {&w.post_ffn_norm, &p.post_ffn_norm}};
  const char* optional_names[] = {"q_norm", "k_norm", "post_attn_norm", "post_ffn_norm"};
  const std::int64_t optional_sizes[] = {c.head_dim, c.head_dim, dim, dim};
  const bool wanted[] = {c.qk_norm, c.qk_norm, c.post_norms, c.post_norms};
  for (std::size_t i = 0; i < std::size(optional); ++i) {
    if (!wanted[i]) continue;
    auto v = vector_of(*optional[i].first, optional_names[i], optional_sizes[i]);
    if (!v) return v.error();
    *optional[i].second = std::move(*v);
  }
  if (c.qkv_bias) {
    auto bq = vector_of(w.bq, "bq", q);
    auto bk = vector_of(w.bk, "bk", kv);
    auto bv = vector_of(w.bv, "bv", kv);
    if (!bq) return bq.error();
    if (!bk) return bk.error();
    if (!bv) return bv.error();
    p.bq = std::move(*bq);
    p.bk = std::move(*bk);
    p.bv = std::move(*bv);
  }
  return p;
}

Result<void> check_config(const ModelConfig& c) {
  if (c.n_layers <= 0 || c.dim <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0 ||
      c.ff_dim <= 0 || c.vocab_size <= 0) {
    return fail("model config has a non-positive size");
  }
  if (c.n_heads % c.n_kv_heads != 0) return fail("n_heads is not a multiple of n_kv_heads");
  const std::int32_t rope_dims = c.rope_dims > 0 ? c.rope_dims : c.head_dim;
  if (rope_dims > c.head_dim || rope_dims % 2 != 0) return fail("rope_dims must be even and <= head_dim");
  return {};
}

}  // namespace

Result<PreparedWeights> prepare_weights(const ModelWeights& w, TpRank tp) {
  const ModelConfig& c = w.config;
  if (auto ok = check_config(c); !ok) return ok.error();
  if (std::int32_t(w.layers.size()) != c.n_layers) {
    return fail("the model has " + std::to_string(w.layers.size()) + " layers, the config " +
                std::to_string(c.n_layers));
  }
  PreparedWeights p;
  if (auto ok = check(w.token_embedding, "token_embedding", {c.vocab_size, c.dim}); !ok) return ok.error();
  const Tensor& out = w.output.present() ? w.output : w.token_embedding;
  if (auto ok = check(out, "output", {tp.vocab_rows(c.vocab_size), c.dim}); !ok) return ok.error();
  p.token_embedding = kernels::cpu::weight_view(w.token_embedding);
  p.output = kernels::cpu::weight_view(out);
  auto on = vector_of(w.output_norm, "output_norm", c.dim);
  if (!on) return on.error();
  p.output_norm = std::move(*on);
  for (const auto& lw : w.layers) {
    auto layer = prepare_layer(lw, c);
    if (!layer) return fail("layer " + std::to_string(p.layers.size()) + ": " + layer.error().message);
    const auto l = std::int32_t(p.layers.size());
    layer->window = c.layer_window(l);
    layer->windowed_rope = layer->window > 0 && c.rope_theta_windowed > 0.0f;
    p.layers.push_back(std::move(*layer));
  }
  kernels::cpu::RopeParams rope;
  rope.head_dim = c.head_dim;
  rope.rope_dims = c.rope_dims > 0 ? c.rope_dims : c.head_dim;
  rope.theta = c.rope_theta;
  rope.style = c.rope_style;
  rope.scaling = c.rope_scaling;
  std::vector<float> divisors;
  if (w.rope_freqs.present()) {
    auto d = vector_of(w.rope_freqs, "rope_freqs", rope.rope_dims / 2);
    if (!d) return d.error();
    divisors = std::move(*d);
    for (float x : divisors) {
      if (!(x > 0.0f) || !std::isfinite(x)) return fail("rope_freqs (" + w.rope_freqs.name + ") holds a divisor that is not positive");
    }
  }
  p.inv_freq = kernels::cpu::rope_inv_freq(rope, divisors);
  p.rope_q = rope;
  p.rope_q.n_heads = c.n_heads;
  p.rope_k = rope;
  p.rope_k.n_heads = c.n_kv_heads;
  // Gemma 3's local layers: their own base, no scaling (llama.cpp's
  // rope_freq_base_train_swa and a freq_scale of 1).
  kernels::cpu::RopeParams local = rope;
  local.theta = c.rope_theta_windowed > 0.0f ? c.rope_theta_windowed : c.rope_theta;
  local.scaling = {};
  p.inv_freq_windowed = kernels::cpu::rope_inv_freq(local);
  p.rope_q_windowed = local;
  p.rope_q_windowed.n_heads = c.n_heads;
  p.rope_k_windowed = local;
  p.rope_k_windowed.n_heads = c.n_kv_heads;
  p.attention.n_heads = c.n_heads;
  p.attention.n_kv_heads = c.n_kv_heads;
  p.attention.head_dim = c.head_dim;
  p.attention.scale = c.softmax_scale();
  return p;
}

void ForwardScratch::resize(std::size_t n, const ModelConfig& c) {
  x.resize(n * std::size_t(c.dim));
  xn.resize(n * std::size_t(c.dim));
  tmp.resize(n * std::size_t(c.dim));
  q.resize(n * std::size_t(c.q_dim()));
  att.resize(n * std::size_t(c.q_dim()));
  k.resize(n * std::size_t(c.kv_dim()));
  v.resize(n * std::size_t(c.kv_dim()));
  gate.resize(n * std::size_t(c.ff_dim));
  up.resize(n * std::size_t(c.ff_dim));
}

}  // namespace pensieve::model
