#include "gpu/model/cpu_forward.hpp"

#include "gpu/kernels/cpu/elementwise.hpp"
#include "gpu/kernels/cpu/embedding.hpp"
#include "gpu/kernels/cpu/matmul.hpp"
#include "gpu/kernels/cpu/rms_norm.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace pensieve::model {

namespace kc = kernels::cpu;

namespace {

kc::RowsView rows_of(std::vector<float>& buf, std::size_t n, std::int64_t cols) {
  return {buf.data(), std::int64_t(n), cols, cols};
}

}  // namespace

Result<CpuForward> CpuForward::create(ModelWeights weights, CpuForwardOptions options) {
  auto prepared = prepare_weights(weights);
  if (!prepared) return prepared.error();
  if (options.kv_tile_tokens <= 0) return fail("kv_tile_tokens must be positive");
  return CpuForward(std::move(weights), options, std::move(*prepared));
}

CpuForward::CpuForward(ModelWeights weights, CpuForwardOptions options, PreparedWeights prepared)
    : weights_(std::move(weights)),
      options_(options),
      prepared_(std::move(prepared)),
      pool_(std::make_unique<kc::ThreadPool>(options.n_threads ? options.n_threads
                                                               : kc::default_thread_count(),
                                           options.min_parallel_cost)) {
  prepared_.attention.kv_tile_tokens = options.kv_tile_tokens;
}

Result<void> CpuForward::validate(std::span<const ForwardSequence> batch) const {
  const ModelConfig& c = weights_.config;
  for (std::size_t s = 0; s < batch.size(); ++s) {
    const ForwardSequence& seq = batch[s];
    const std::string where = "sequence " + std::to_string(s) + ": ";
    if (seq.kv == nullptr) return fail(where + "no KV cache");
    if (seq.tokens.empty()) return fail(where + "no tokens");
    if (seq.start_pos < 0 || seq.start_pos > seq.kv->size_tokens()) {
      return fail(where + "start position " + std::to_string(seq.start_pos) +
                  " is past the " + std::to_string(seq.kv->size_tokens()) + " cached tokens");
    }
    if (std::int64_t(seq.start_pos) + std::int64_t(seq.tokens.size()) > seq.kv->max_tokens()) {
      return fail(where + "the KV cache holds " + std::to_string(seq.kv->max_tokens()) + " tokens");
    }
    for (auto t : seq.tokens) {
      if (t < 0 || t >= c.vocab_size) return fail(where + "token id " + std::to_string(t) + " out of range");
    }
    for (std::size_t o = 0; o < s; ++o) {
      if (batch[o].kv == seq.kv) return fail(where + "shares its KV cache with sequence " + std::to_string(o));
    }
  }
  return {};
}

Result<ForwardOutput> CpuForward::forward(std::span<const ForwardSequence> batch) {
  if (auto ok = validate(batch); !ok) return ok.error();
  const ModelConfig& c = weights_.config;
  scratch_.tokens.clear();
  scratch_.positions.clear();
  for (const auto& seq : batch) {
    for (std::size_t i = 0; i < seq.tokens.size(); ++i) {
      scratch_.tokens.push_back(seq.tokens[i]);
      scratch_.positions.push_back(seq.start_pos + std::int32_t(i));
    }
  }
  const std::size_t n = scratch_.tokens.size();
  scratch_.resize(n, c);
  kc::embedding_lookup(prepared_.token_embedding, scratch_.tokens, rows_of(scratch_.x, n, c.dim));
  for (std::int32_t l = 0; l < c.n_layers; ++l) layer(l, batch);
  for (const auto& seq : batch) {
    seq.kv->set_size_tokens(seq.start_pos + std::int32_t(seq.tokens.size()));
  }
  ForwardOutput out;
  output_head(batch, out);
  return out;
}

void CpuForward::layer(std::int32_t l, std::span<const ForwardSequence> batch) {
  const ModelConfig& c = weights_.config;
  const PreparedLayer& w = prepared_.layers[std::size_t(l)];
  const std::size_t n = scratch_.tokens.size();
  kc::ThreadPool& pool = *pool_;
  auto mm = [&](std::vector<float>& in, std::int64_t in_cols, const kc::WeightView& wt,
                std::vector<float>& y) {
    kc::MatmulParams mp;
    mp.round_activations_to_f16 = options_.round_f16_activations && wt.dtype == DType::f16;
    kc::matmul(mp, rows_of(in, n, in_cols), wt, rows_of(y, n, wt.rows), pool, scratch_.rounded);
  };
  const kc::RowsView x = rows_of(scratch_.x, n, c.dim), xn = rows_of(scratch_.xn, n, c.dim);
  kc::rms_norm({c.rms_eps}, x, w.attn_norm.data(), xn, pool);
  mm(scratch_.xn, c.dim, w.wq, scratch_.q);
  mm(scratch_.xn, c.dim, w.wk, scratch_.k);
  mm(scratch_.xn, c.dim, w.wv, scratch_.v);
  const kc::RowsView q = rows_of(scratch_.q, n, c.q_dim()), k = rows_of(scratch_.k, n, c.kv_dim()),
                     v = rows_of(scratch_.v, n, c.kv_dim());
  if (!w.bq.empty()) {
    kc::add_bias(q, w.bq.data());
    kc::add_bias(k, w.bk.data());
    kc::add_bias(v, w.bv.data());
  }
  kc::rope(prepared_.rope_q, prepared_.inv_freq, q, scratch_.positions);
  kc::rope(prepared_.rope_k, prepared_.inv_freq, k, scratch_.positions);
  // Store the new K/V, then attend over each sequence's cache.
  scratch_.attention_batch.clear();
  std::size_t row = 0;
  for (const auto& seq : batch) {
    const auto count = std::int32_t(seq.tokens.size());
    const std::int64_t stride = seq.kv->token_stride();
    std::memcpy(seq.kv->k(l) + seq.start_pos * stride, k.row(std::int64_t(row)),
                std::size_t(count) * std::size_t(stride) * sizeof(float));
    std::memcpy(seq.kv->v(l) + seq.start_pos * stride, v.row(std::int64_t(row)),
                std::size_t(count) * std::size_t(stride) * sizeof(float));
    kc::AttentionSequence a;
    a.q = q.row(std::int64_t(row));
    a.q_stride = q.stride;
    a.n_queries = count;
    a.start_pos = seq.start_pos;
    a.k = seq.kv->k(l);
    a.v = seq.kv->v(l);
    a.out = scratch_.att.data() + row * std::size_t(c.q_dim());
    a.out_stride = c.q_dim();
    scratch_.attention_batch.push_back(a);
    row += std::size_t(count);
  }
  kc::attention(prepared_.attention, scratch_.attention_batch, pool);
  mm(scratch_.att, c.q_dim(), w.wo, scratch_.tmp);
  kc::add_inplace(x, rows_of(scratch_.tmp, n, c.dim));
  kc::rms_norm({c.rms_eps}, x, w.ffn_norm.data(), xn, pool);
  mm(scratch_.xn, c.dim, w.w_gate, scratch_.gate);
  mm(scratch_.xn, c.dim, w.w_up, scratch_.up);
  kc::silu_mul(rows_of(scratch_.gate, n, c.ff_dim), rows_of(scratch_.up, n, c.ff_dim), pool);
  mm(scratch_.gate, c.ff_dim, w.w_down, scratch_.tmp);
  kc::add_inplace(x, rows_of(scratch_.tmp, n, c.dim));
}

void CpuForward::output_head(std::span<const ForwardSequence> batch, ForwardOutput& out) {
  const ModelConfig& c = weights_.config;
  // Gather the rows whose logits were asked for, then norm and project them.
  std::vector<float>& sel = scratch_.xn;
  out.vocab_size = c.vocab_size;
  out.first_row.assign(1, 0);
  std::size_t row = 0, n_sel = 0;
  for (const auto& seq : batch) {
    const std::size_t count = seq.tokens.size();
    for (std::size_t i = seq.all_logits ? 0 : count - 1; i < count; ++i) {
      std::memcpy(sel.data() + n_sel * std::size_t(c.dim), scratch_.x.data() + (row + i) * std::size_t(c.dim),
                  std::size_t(c.dim) * sizeof(float));
      out.row_position.push_back(seq.start_pos + std::int32_t(i));
      ++n_sel;
    }
    out.first_row.push_back(n_sel);
    row += count;
  }
  const kc::RowsView s = rows_of(sel, n_sel, c.dim);
  kc::rms_norm({c.rms_eps}, s, prepared_.output_norm.data(), s, *pool_);
  out.logits.resize(n_sel * std::size_t(c.vocab_size));
  kc::MatmulParams mp;
  mp.round_activations_to_f16 = options_.round_f16_activations && prepared_.output.dtype == DType::f16;
  kc::matmul(mp, s, prepared_.output, rows_of(out.logits, n_sel, c.vocab_size), *pool_,
             scratch_.rounded);
}

}  // namespace pensieve::model
