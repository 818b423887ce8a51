#include "gpu/model/cpu_forward.hpp"

#include "gpu/kernels/cpu/elementwise.hpp"
#include "gpu/kernels/cpu/embedding.hpp"
#include "gpu/kernels/cpu/matmul.hpp"
#include "gpu/kernels/cpu/paged_attention.hpp"
#include "gpu/kernels/cpu/reshape_and_cache.hpp"
#include "gpu/kernels/cpu/attention_contiguous.hpp"
#include "gpu/kernels/cpu/attention_pool_runner.hpp"
#include "gpu/kernels/cpu/rms_norm.hpp"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>

namespace pensieve::model {

namespace kc = kernels::cpu;

namespace {

kc::RowsView rows_of(std::vector<float>& buf, std::size_t n, std::int64_t cols) {
  return {buf.data(), std::int64_t(n), cols, cols};
}

}  // namespace

Result<CpuForward> CpuForward::create(ModelWeights weights, CpuForwardOptions options) {
  const TpRank tp = options.tp;
  if (tp.ranks < 1 || tp.rank < 0 || tp.rank >= tp.ranks) {
    return fail("tensor-parallel rank " + std::to_string(tp.rank) + " of " + std::to_string(tp.ranks) +
                " is out of range");
  }
  if (tp.sharded() && (options.collective == nullptr || options.collective->rank() != tp.rank ||
                       options.collective->ranks() != tp.ranks)) {
    return fail("a tensor-parallel shard needs a collective of the same rank and size");
  }
  if (options.kv_tile_tokens <= 0) return fail("kv_tile_tokens must be positive");
  // Check before copying gigabytes: prepare_weights names the bad tensor.
  if (auto checked = prepare_weights(weights, tp); !checked) return checked.error();
  WeightPlacement placement;
  placement.fallback_reason = "weights_on_huge_pages is off";
  if (options.weights_on_huge_pages) placement = place_weights_on_huge_pages(weights);
  if (options.log_weight_placement) std::fprintf(stderr, "pensieve: %s\n", placement.describe().c_str());
  auto prepared = prepare_weights(weights, tp);  // views of where the weights now live
  if (!prepared) return prepared.error();
  return CpuForward(std::move(weights), options, std::move(*prepared), std::move(placement));
}

CpuForward::CpuForward(ModelWeights weights, CpuForwardOptions options, PreparedWeights prepared,
                       WeightPlacement placement)
    : weights_(std::move(weights)),
      options_(options),
      prepared_(std::move(prepared)),
      placement_(std::move(placement)),
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

template <class Seq>
void CpuForward::gather_tokens(std::span<const Seq> batch) {
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
  if (c.embedding_scale != 1.0f) kc::scale_inplace(rows_of(scratch_.x, n, c.dim), c.embedding_scale);
}

Result<ForwardOutput> CpuForward::forward(std::span<const ForwardSequence> batch) {
  if (auto ok = validate(batch); !ok) return ok.error();
  gather_tokens(batch);
  for (std::int32_t l = 0; l < weights_.config.n_layers; ++l) {
    auto ok = layer(l, [&](std::int32_t layer) { attend_contiguous(layer, batch); });
    if (!ok) return ok.error();
  }
  std::vector<OutputRow> rows;
  for (const auto& seq : batch) {
    seq.kv->set_size_tokens(seq.start_pos + std::int32_t(seq.tokens.size()));
    rows.push_back({seq.tokens.size(), seq.start_pos, seq.all_logits});
  }
  return output_head(rows);
}

kv::KvPoolConfig CpuForward::kv_pool_config(std::int32_t num_blocks, std::int32_t block_tokens,
                                            kv::KvDType dtype) const {
  const ModelConfig& c = weights_.config;
  kv::KvPoolConfig k;
  k.num_blocks = num_blocks;
  k.block_tokens = block_tokens;
  k.n_layers = c.n_layers;
  k.n_kv_heads = c.n_kv_heads;
  k.head_dim = c.head_dim;
  k.dtype = dtype;
  return k;
}

Result<void> validate_paged_batch(std::span<const PagedSequence> batch, const ModelConfig& c,
                                  const kv::KvPoolConfig& k) {
  if (k.n_layers != c.n_layers || k.n_kv_heads != c.n_kv_heads || k.head_dim != c.head_dim) {
    return fail("the KV pool's layout does not fit this model");
  }
  for (std::size_t s = 0; s < batch.size(); ++s) {
    const PagedSequence& seq = batch[s];
    const std::string where = "sequence " + std::to_string(s) + ": ";
    if (seq.tokens.empty()) return fail(where + "no tokens");
    if (seq.start_pos < 0) return fail(where + "negative start position");
    const std::int64_t end = std::int64_t(seq.start_pos) + std::int64_t(seq.tokens.size());
    if (end > std::int64_t(seq.blocks.size()) * k.block_tokens) {
      return fail(where + "its " + std::to_string(seq.blocks.size()) + " blocks hold fewer than " +
                  std::to_string(end) + " tokens");
    }
    for (kv::BlockId b : seq.blocks) {
      if (b.value >= std::uint32_t(k.num_blocks)) return fail(where + "block id out of range");
    }
    for (auto t : seq.tokens) {
      if (t < 0 || t >= c.vocab_size) return fail(where + "token id " + std::to_string(t) + " out of range");
    }
  }
  return {};
}

Result<void> CpuForward::validate_paged(std::span<const PagedSequence> batch, const kv::KvPool& pool) const {
  return validate_paged_batch(batch, weights_.config, pool.config());
}

Result<ForwardOutput> CpuForward::forward_paged(std::span<const PagedSequence> batch, kv::KvPool& pool,
                                                const LayerHook& before_layer) {
  if (auto ok = validate_paged(batch, pool); !ok) return ok.error();
  if (batch.empty()) return ForwardOutput{weights_.config.vocab_size, {}, {0}, {}};
  gather_tokens(batch);
  // Per-batch inputs of the paged kernels, shared by every layer.
  const std::int32_t bt = pool.config().block_tokens;
  std::size_t max_blocks = 0;
  for (const auto& seq : batch) max_blocks = std::max(max_blocks, seq.blocks.size());
  q_start_.assign(1, 0);
  context_tokens_.clear();
  slots_.clear();
  block_table_.assign(batch.size() * max_blocks, 0);
  for (std::size_t s = 0; s < batch.size(); ++s) {
    const PagedSequence& seq = batch[s];
    const auto n = std::int32_t(seq.tokens.size());
    q_start_.push_back(q_start_.back() + n);
    context_tokens_.push_back(seq.start_pos + n);
    for (std::size_t j = 0; j < seq.blocks.size(); ++j) {
      block_table_[s * max_blocks + j] = std::int32_t(seq.blocks[j].value);
    }
    for (std::int32_t i = 0; i < n; ++i) {
      const std::int32_t pos = seq.start_pos + i;
      slots_.push_back(std::int64_t(seq.blocks[std::size_t(pos / bt)].value) * bt + pos % bt);
    }
  }
  for (std::int32_t l = 0; l < weights_.config.n_layers; ++l) {
    if (before_layer) before_layer(l);
    auto ok = layer(l, [&](std::int32_t layer) { attend_paged(layer, batch, pool); });
    if (!ok) return ok.error();
  }
  std::vector<OutputRow> rows;
  for (const auto& seq : batch) rows.push_back({seq.tokens.size(), seq.start_pos, seq.all_logits});
  return output_head(rows);
}

void CpuForward::attend_contiguous(std::int32_t l, std::span<const ForwardSequence> batch) {
  // One call per sequence (each cache is its own allocation), with the paged
  // kernel's arithmetic and tile, so both paths give the same bits.
  const ModelConfig& c = weights_.config;
  kc::ThreadPoolRunner runner(*pool_);
  std::size_t row = 0;
  for (const auto& seq : batch) {
    const auto count = std::int32_t(seq.tokens.size());
    const std::int64_t stride = seq.kv->token_stride();
    std::memcpy(seq.kv->k(l) + seq.start_pos * stride, scratch_.k.data() + row * std::size_t(stride),
                std::size_t(count) * std::size_t(stride) * sizeof(float));
    std::memcpy(seq.kv->v(l) + seq.start_pos * stride, scratch_.v.data() + row * std::size_t(stride),
                std::size_t(count) * std::size_t(stride) * sizeof(float));
    const std::int32_t q_start[2] = {0, count};
    const std::int32_t context = seq.start_pos + count;
    const std::int64_t kv_start = 0;
    kernels::AttentionPlanOptions o;
    o.kv_tile_tokens = options_.kv_tile_tokens;
    o.workers = std::int32_t(pool_->size());
    auto plan = kernels::plan_paged_attention({q_start, std::span(&context, 1)}, c.n_kv_heads, o);
    assert(plan && "validated batch");
    kc::ContiguousAttentionParams p;
    p.q = scratch_.q.data() + row * std::size_t(c.q_dim());
    p.out = scratch_.att.data() + row * std::size_t(c.q_dim());
    p.k = seq.kv->k(l);
    p.v = seq.kv->v(l);
    p.kv_start = &kv_start;
    p.q_start = q_start;
    p.context_tokens = &context;
    p.num_seqs = 1;
    p.n_heads = c.n_heads;
    p.n_kv_heads = c.n_kv_heads;
    p.head_dim = c.head_dim;
    p.softmax_scale = prepared_.attention.scale;
    p.sliding_window = prepared_.layers[std::size_t(l)].window;
    p.logit_softcap = c.attn_logit_softcap;
    kc::contiguous_attention(p, *plan, attention_workspace_, runner);
    row += std::size_t(count);
  }
}

void CpuForward::attend_paged(std::int32_t l, std::span<const PagedSequence> batch, kv::KvPool& pool) {
  const ModelConfig& c = weights_.config;
  const kv::PagedKvView view = pool.layer(l);
  kernels::ReshapeAndCacheParams store;
  store.k = scratch_.k.data();
  store.v = scratch_.v.data();
  store.slots = slots_.data();
  store.num_tokens = std::int32_t(slots_.size());
  store.cache = view;
  kc::reshape_and_cache(store);
  kernels::PagedAttentionParams p;
  p.q = scratch_.q.data();
  p.out = scratch_.att.data();
  p.kv = view;
  p.q_start = q_start_.data();
  p.context_tokens = context_tokens_.data();
  p.block_table = block_table_.data();
  p.max_blocks_per_seq = std::int32_t(block_table_.size() / batch.size());
  p.num_seqs = std::int32_t(batch.size());
  p.n_heads = c.n_heads;
  p.softmax_scale = prepared_.attention.scale;
  p.sliding_window = prepared_.layers[std::size_t(l)].window;
  p.logit_softcap = c.attn_logit_softcap;
  if (l == 0) {
    kernels::AttentionPlanOptions o;
    o.kv_tile_tokens = options_.kv_tile_tokens;
    o.workers = std::int32_t(pool_->size());
    auto plan = kernels::plan_paged_attention({q_start_, context_tokens_}, c.n_kv_heads, o);
    assert(plan && "validated batch");
    plan_ = std::move(*plan);
  }
  kc::ThreadPoolRunner runner(*pool_);
  kc::paged_attention(p, plan_, attention_workspace_, runner);
}

Result<void> CpuForward::all_reduce(std::vector<float>& rows, std::size_t n_rows) {
  if (!options_.tp.sharded()) return {};
  return options_.collective->all_reduce_sum(rows.data(), n_rows * std::size_t(weights_.config.dim));
}

Result<void> CpuForward::layer(std::int32_t l, const AttendFn& attend) {
  const ModelConfig& c = weights_.config;
  const PreparedLayer& w = prepared_.layers[std::size_t(l)];
  const std::size_t n = scratch_.tokens.size();
  kc::ThreadPool& pool = *pool_;
  auto params = [&](const kc::WeightView& wt) {
    kc::MatmulParams mp;
    mp.round_activations_to_f16 = options_.round_f16_activations && wt.dtype == DType::f16;
    mp.float_activations = options_.float_activations;
    return mp;
  };
  auto mm = [&](std::vector<float>& in, std::int64_t in_cols, const kc::WeightView& wt,
                std::vector<float>& y) {
    kc::matmul(params(wt), rows_of(in, n, in_cols), wt, rows_of(y, n, wt.rows), pool, scratch_.rounded);
  };
  // Projections of xn in one pool dispatch (Q/K/V, gate/up): a decode step
  // pays 4 fork/joins per layer instead of 7. Same bits as one call each.
  auto mm_xn = [&](std::initializer_list<std::pair<const kc::WeightView*, std::vector<float>*>> outs) {
    kc::WeightView ws[3];
    kc::RowsView ys[3];
    std::size_t count = 0;
    const bool round0 = params(*outs.begin()->first).round_activations_to_f16;
    bool same_params = true;
    for (auto [wt, y] : outs) {
      same_params = same_params && params(*wt).round_activations_to_f16 == round0;
      ws[count] = *wt;
      ys[count++] = rows_of(*y, n, wt->rows);
    }
    if (!same_params) {
      for (auto [wt, y] : outs) mm(scratch_.xn, c.dim, *wt, *y);
      return;
    }
    kc::matmul_many(params(ws[0]), rows_of(scratch_.xn, n, c.dim), std::span(ws, count),
                    std::span<const kc::RowsView>(ys, count), pool, scratch_.rounded);
  };
  const kc::RowsView x = rows_of(scratch_.x, n, c.dim), xn = rows_of(scratch_.xn, n, c.dim);
  kc::rms_norm({c.rms_eps}, x, w.attn_norm.data(), xn, pool);
  mm_xn({{&w.wq, &scratch_.q}, {&w.wk, &scratch_.k}, {&w.wv, &scratch_.v}});
  const kc::RowsView q = rows_of(scratch_.q, n, c.q_dim()), k = rows_of(scratch_.k, n, c.kv_dim()),
                     v = rows_of(scratch_.v, n, c.kv_dim());
  if (!w.bq.empty()) {
    kc::add_bias(q, w.bq.data());
    kc::add_bias(k, w.bk.data());
    kc::add_bias(v, w.bv.data());
  }
  if (!w.q_norm.empty()) {
    // Each head of q and k on its own (Qwen3, Gemma 3): rows of head_dim.
    const kc::RowsView q_heads{scratch_.q.data(), std::int64_t(n) * c.n_heads, c.head_dim, c.head_dim};
    const kc::RowsView k_heads{scratch_.k.data(), std::int64_t(n) * c.n_kv_heads, c.head_dim, c.head_dim};
    kc::rms_norm({c.rms_eps}, q_heads, w.q_norm.data(), q_heads, pool);
    kc::rms_norm({c.rms_eps}, k_heads, w.k_norm.data(), k_heads, pool);
  }
  if (w.windowed_rope) {
    kc::rope(prepared_.rope_q_windowed, prepared_.inv_freq_windowed, q, scratch_.positions);
    kc::rope(prepared_.rope_k_windowed, prepared_.inv_freq_windowed, k, scratch_.positions);
  } else {
    kc::rope(prepared_.rope_q, prepared_.inv_freq, q, scratch_.positions);
    kc::rope(prepared_.rope_k, prepared_.inv_freq, k, scratch_.positions);
  }
  attend(l);  // stores the new K/V, then attends over each sequence's cache
  const kc::RowsView delta = rows_of(scratch_.tmp, n, c.dim);
  mm(scratch_.att, c.q_dim(), w.wo, scratch_.tmp);
  if (auto ok = all_reduce(scratch_.tmp, n); !ok) return ok.error();  // row-parallel O
  if (!w.post_attn_norm.empty()) kc::rms_norm({c.rms_eps}, delta, w.post_attn_norm.data(), delta, pool);
  kc::add_inplace(x, delta);
  kc::rms_norm({c.rms_eps}, x, w.ffn_norm.data(), xn, pool);
  mm_xn({{&w.w_gate, &scratch_.gate}, {&w.w_up, &scratch_.up}});
  if (c.ffn_activation == FfnActivation::gelu_tanh) {
    kc::gelu_mul(rows_of(scratch_.gate, n, c.ff_dim), rows_of(scratch_.up, n, c.ff_dim), pool);
  } else {
    kc::silu_mul(rows_of(scratch_.gate, n, c.ff_dim), rows_of(scratch_.up, n, c.ff_dim), pool);
  }
  mm(scratch_.gate, c.ff_dim, w.w_down, scratch_.tmp);
  if (auto ok = all_reduce(scratch_.tmp, n); !ok) return ok.error();  // row-parallel down
  if (!w.post_ffn_norm.empty()) kc::rms_norm({c.rms_eps}, delta, w.post_ffn_norm.data(), delta, pool);
  kc::add_inplace(x, delta);
  return {};
}

Result<ForwardOutput> CpuForward::output_head(std::span<const OutputRow> seqs) {
  const ModelConfig& c = weights_.config;
  // Gather the rows whose logits were asked for, then norm and project them.
  std::vector<float>& sel = scratch_.xn;
  ForwardOutput out;
  out.vocab_size = c.vocab_size;
  out.first_row.assign(1, 0);
  std::size_t row = 0, n_sel = 0;
  for (const OutputRow& seq : seqs) {
    const std::size_t count = seq.n_tokens;
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
  if (options_.tp.sharded()) {
    if (auto ok = sharded_logits(s, out); !ok) return ok.error();
    if (c.final_logit_softcap > 0.0f) {
      kc::softcap({out.logits.data(), std::int64_t(n_sel), c.vocab_size, c.vocab_size}, c.final_logit_softcap);
    }
    return out;
  }
  out.logits.resize(n_sel * std::size_t(c.vocab_size));
  kc::MatmulParams mp;
  mp.round_activations_to_f16 = options_.round_f16_activations && prepared_.output.dtype == DType::f16;
  mp.float_activations = options_.float_activations;
  kc::matmul(mp, s, prepared_.output, rows_of(out.logits, n_sel, c.vocab_size), *pool_,
             scratch_.rounded);
  if (c.final_logit_softcap > 0.0f) kc::softcap(rows_of(out.logits, n_sel, c.vocab_size), c.final_logit_softcap);
  return out;
}

Result<void> CpuForward::sharded_logits(kc::ConstRowsView rows, ForwardOutput& out) {
  const std::int32_t vocab = weights_.config.vocab_size;
  const TpRank tp = options_.tp;
  const auto n = std::size_t(rows.rows), slice = std::size_t(tp.vocab_slice(vocab));
  // Padding columns (the last rank's) stay zero, so what is sent is defined.
  slice_logits_.assign(n * slice, 0.0f);
  kc::MatmulParams mp;
  mp.round_activations_to_f16 = options_.round_f16_activations && prepared_.output.dtype == DType::f16;
  mp.float_activations = options_.float_activations;
  const kc::RowsView mine{slice_logits_.data(), std::int64_t(n), tp.vocab_rows(vocab), std::int64_t(slice)};
  kc::matmul(mp, rows, prepared_.output, mine, *pool_, scratch_.rounded);
  gathered_logits_.resize(n * slice * std::size_t(tp.ranks));
  auto ok = options_.collective->all_gather(slice_logits_.data(), gathered_logits_.data(), n * slice);
  if (!ok) return ok.error();
  // gathered is [rank][row][slice]; the output is [row][vocab].
  out.logits.resize(n * std::size_t(vocab));
  for (std::int32_t r = 0; r < tp.ranks; ++r) {
    const TpRank owner{r, tp.ranks};
    const auto begin = std::size_t(owner.vocab_begin(vocab)), count = std::size_t(owner.vocab_rows(vocab));
    for (std::size_t i = 0; i < n; ++i) {
      std::memcpy(out.logits.data() + i * std::size_t(vocab) + begin,
                  gathered_logits_.data() + (std::size_t(r) * n + i) * slice, count * sizeof(float));
    }
  }
  return {};
}

}  // namespace pensieve::model
