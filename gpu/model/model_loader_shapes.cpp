#include "gpu/model/model_loader_shapes.hpp"

#include "gpu/formats/quant_block_check.hpp"

namespace pensieve::model {

namespace {

std::string shape_str(const std::vector<std::int64_t>& shape) {
  std::string s = "{";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "}";
}

Result<void> expect(const Tensor& t, std::vector<std::int64_t> shape) {
  if (!t.present()) return {};
  if (t.shape != shape) {
    return fail("tensor " + t.name + " has shape " + shape_str(t.shape) + " but the config needs " +
                shape_str(shape));
  }
  // Quantised vectors are meaningless to the kernels; vectors must be plain floats.
  if (shape.size() == 1 && dtype_block_elems(t.dtype) != 1) {
    return fail(std::string("tensor ") + t.name + " is a vector of type " + dtype_name(t.dtype) +
                " (F32/F16/BF16 expected)");
  }
  return check_quant_blocks(t);
}

Result<void> check_config(const ModelConfig& c) {
  if (c.n_layers <= 0 || c.dim <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0 ||
      c.ff_dim <= 0 || c.vocab_size <= 0) {
    return fail("config has a non-positive size");
  }
  if (c.n_heads % c.n_kv_heads != 0) return fail("config: n_heads is not a multiple of n_kv_heads");
  return {};
}

}  // namespace

Result<void> check_shapes(const ModelWeights& w) {
  const ModelConfig& c = w.config;
  if (auto ok = check_config(c); !ok) return ok;
  const std::int64_t dim = c.dim, q = c.q_dim(), kv = c.kv_dim(), ff = c.ff_dim, vocab = c.vocab_size;
  if (auto ok = expect(w.token_embedding, {vocab, dim}); !ok) return ok;
  if (auto ok = expect(w.output, {vocab, dim}); !ok) return ok;
  if (auto ok = expect(w.output_norm, {dim}); !ok) return ok;
  if (auto ok = expect(w.rope_freqs, {c.rope_dims / 2}); !ok) return ok;
  if (w.rope_freqs.present() && w.rope_freqs.dtype != DType::f32) return fail("tensor rope_freqs must be F32");
  if (w.layers.size() != std::size_t(c.n_layers)) return fail("layer count disagrees with the config");
  for (const LayerWeights& L : w.layers) {
    const std::pair<const Tensor*, std::vector<std::int64_t>> checks[] = {
        {&L.attn_norm, {dim}}, {&L.wq, {q, dim}},      {&L.wk, {kv, dim}},     {&L.wv, {kv, dim}},
        {&L.wo, {dim, q}},     {&L.bq, {q}},           {&L.bk, {kv}},          {&L.bv, {kv}},
        {&L.ffn_norm, {dim}},  {&L.w_gate, {ff, dim}}, {&L.w_up, {ff, dim}},   {&L.w_down, {dim, ff}},
        {&L.q_norm, {c.head_dim}}, {&L.k_norm, {c.head_dim}}, {&L.post_attn_norm, {dim}},
        {&L.post_ffn_norm, {dim}},
    };
    for (const auto& [t, shape] : checks) {
      if (auto ok = expect(*t, shape); !ok) return ok;
    }
  }
  return {};
}

}  // namespace pensieve::model
