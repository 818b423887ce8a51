#include "bench/model-bench/model_run.hpp"

#include "gpu/kv/kv_pool.hpp"
#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/gguf_loader.hpp"
#include "gpu/model/test_model.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include <time.h>

namespace pensieve::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Token ids spread over the vocabulary, away from the special ids 0..2.
std::vector<std::int32_t> prompt_ids(std::int32_t n, std::int32_t vocab) {
  std::vector<std::int32_t> ids;
  for (std::int32_t i = 0; i < n; ++i)
    ids.push_back(3 + static_cast<std::int32_t>((std::int64_t(i) * 7919) % (vocab - 3)));
  return ids;
}

std::int32_t argmax(std::span<const float> v) {
  return static_cast<std::int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Bytes one decode step reads: every layer tensor in full, the final norm and
// the output head, and one row of the token embedding.
double decode_weight_bytes(const model::ModelWeights& w) {
  double bytes = 0;
  for (const auto& l : w.layers) {
    for (const model::Tensor* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv,
                                   &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down})
      bytes += static_cast<double>(t->size_bytes);
  }
  bytes += static_cast<double>(w.output_norm.size_bytes + w.output.size_bytes);
  bytes += static_cast<double>(
      model::dtype_row_bytes(w.token_embedding.dtype, w.token_embedding.cols()));
  return bytes;
}

// The weights every decoded token multiplies: the layer matrices and the
// output head (2 FLOPs each per token).
double matrix_params(const model::ModelWeights& w) {
  double n = static_cast<double>(w.output.numel());
  for (const auto& l : w.layers)
    for (const model::Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      n += static_cast<double>(t->numel());
  return n;
}

// The share of matrix_params whose weights are quantised blocks: those run
// integer dots on the activations quantised as ggml does (the default
// numerics), held against the int8 dot peak instead of the FMA peak.
double integer_matrix_share(const model::ModelWeights& w) {
  double n = 0;
  auto add = [&n](const model::Tensor& t) {
    if (model::dtype_block_elems(t.dtype) > 1) n += static_cast<double>(t.numel());
  };
  add(w.output);
  for (const auto& l : w.layers)
    for (const model::Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      add(*t);
  const double all = matrix_params(w);
  return all > 0 ? n / all : 0.0;
}

double count_params(const model::ModelWeights& w) {
  double n = static_cast<double>(w.token_embedding.numel() + w.output_norm.numel());
  if (!w.config.tied_output) n += static_cast<double>(w.output.numel());
  for (const auto& l : w.layers)
    for (const model::Tensor* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv,
                                   &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down})
      if (t->present()) n += static_cast<double>(t->numel());
  return n;
}

// FLOPs of a prefill of `t` tokens that returns the last token's logits:
// 2 per multiply-add of the projections, causal attention (QK^T and PV over
// t(t+1)/2 pairs per head), and the output head for one row.
double prefill_flops(const model::ModelConfig& c, double t) {
  const double per_layer_matrix = double(c.dim) * (2.0 * c.q_dim() + 2.0 * c.kv_dim()) +
                                  3.0 * double(c.dim) * c.ff_dim;
  const double attention_pairs = t * (t + 1) / 2;
  return c.n_layers * (2.0 * t * per_layer_matrix + 4.0 * attention_pairs * c.q_dim()) +
         2.0 * double(c.dim) * c.vocab_size;
}

// Q8_0 blocks are 32 wide along a matrix row, so w_down needs ff % 32 == 0
// (M-tiny's 688 is not): round up to whole blocks.
std::int32_t ff_for(const ModelShape& shape, model::DType dtype) {
  if (dtype != model::DType::q8_0) return shape.ff;
  return (shape.ff + 31) / 32 * 32;
}

Result<std::filesystem::path> generate(const ModelShape& shape, model::DType dtype,
                                       const ModelRunOptions& o) {
  // "-untied": files of the earlier tied generator in the same folder are not reused.
  auto path = o.model_dir / (shape.name + "-" + model::dtype_name(dtype) + "-untied.gguf");
  if (o.reuse_models && std::filesystem::exists(path)) return path;
  model::TestModelOptions m;
  m.n_layers = shape.layers;
  m.dim = shape.dim;
  m.n_heads = shape.heads;
  m.n_kv_heads = shape.kv_heads;
  m.ff_dim = ff_for(shape, dtype);
  m.dtype = dtype;
  m.tied_output = false;  // BENCH.md's parameter counts include a separate head
  m.seed = o.seed;
  m.vocab_from = o.vocab_from;
  if (!o.vocab_from) m.vocab_size = o.vocab_size;
  m.name = "bench-" + shape.name;
  std::filesystem::create_directories(o.model_dir);
  if (auto made = model::make_test_model(m, path); !made) return made.error();
  return path;
}

Result<void> time_prefill(model::CpuForward& fwd, const ModelRunOptions& o, ModelRunResult& r) {
  const auto ids = prompt_ids(o.prompt_tokens, fwd.config().vocab_size);
  auto kv = fwd.make_kv_cache(o.prompt_tokens);
  double best = 1e300;
  for (std::int32_t rep = 0; rep < o.prefill_reps; ++rep) {
    kv.truncate(0);
    model::ForwardSequence seq{ids, 0, &kv, false};
    const double cpu_start = process_cpu_seconds();
    const auto start = Clock::now();
    auto out = fwd.forward(std::span(&seq, 1));
    const double s = seconds_since(start);
    if (!out) return out.error();
    if (s < best) r.prefill_cpu_share = (process_cpu_seconds() - cpu_start) / (s * o.threads);
    best = std::min(best, s);
  }
  r.prefill_seconds = best;
  r.prefill_tokens_per_s = o.prompt_tokens / best;
  r.prefill_flops = prefill_flops(fwd.config(), o.prompt_tokens);
  return {};
}

Result<void> time_decode(model::CpuForward& fwd, const ModelRunOptions& o, ModelRunResult& r) {
  constexpr std::int32_t warmup_steps = 2;
  const auto& c = fwd.config();
  auto kv = fwd.make_kv_cache(o.decode_context + warmup_steps + o.decode_tokens);
  const auto ids = prompt_ids(o.decode_context, c.vocab_size);
  model::ForwardSequence seq{ids, 0, &kv, false};
  auto out = fwd.forward(std::span(&seq, 1));
  if (!out) return out.error();
  std::int32_t token = argmax(out->last(0));
  std::vector<double> step_seconds;
  double total = 0;
  double cpu_seconds = 0;
  for (std::int32_t step = 0; step < warmup_steps + o.decode_tokens; ++step) {
    if (o.bandwidth_sample && step >= warmup_steps && (step - warmup_steps) % 8 == 0) {
      r.decode_bandwidth_samples.push_back(o.bandwidth_sample());
    }
    model::ForwardSequence one{std::span(&token, 1), kv.size_tokens(), &kv, false};
    const double cpu_start = process_cpu_seconds();
    const auto start = Clock::now();
    auto next = fwd.forward(std::span(&one, 1));
    const double s = seconds_since(start);
    const double cpu = process_cpu_seconds() - cpu_start;
    if (!next) return next.error();
    token = argmax(next->last(0));
    if (step >= warmup_steps) {
      step_seconds.push_back(s);
      total += s;
      cpu_seconds += cpu;
    }
  }
  if (o.bandwidth_sample) r.decode_bandwidth_samples.push_back(o.bandwidth_sample());
  if (!r.decode_bandwidth_samples.empty()) {
    auto sorted = r.decode_bandwidth_samples;
    std::sort(sorted.begin(), sorted.end());
    r.decode_bandwidth_median = sorted[sorted.size() / 2];
    // Each run of (up to) 8 steps against the mean of the probes on either side.
    const auto& b = r.decode_bandwidth_samples;
    for (std::size_t i = 0; i + 1 < b.size(); ++i) {
      const std::size_t first = 8 * i, last = std::min(step_seconds.size(), first + 8);
      if (first >= last) break;
      double seconds = 0;
      for (std::size_t k = first; k < last; ++k) seconds += step_seconds[k];
      const double gb_per_s = r.weight_bytes_per_token * double(last - first) / seconds / 1e9;
      r.decode_chunk_fractions.push_back(gb_per_s / ((b[i] + b[i + 1]) / 2));
    }
    auto f = r.decode_chunk_fractions;
    std::sort(f.begin(), f.end());
    if (!f.empty()) r.decode_fraction_between_probes = f[f.size() / 2];
  }
  std::sort(step_seconds.begin(), step_seconds.end());
  r.decode_seconds_per_token = total / o.decode_tokens;
  r.decode_median_seconds = step_seconds[step_seconds.size() / 2];
  r.decode_tokens_per_s = o.decode_tokens / total;
  r.decode_cpu_share = cpu_seconds / (total * o.threads);
  const double mean_context = o.decode_context + warmup_steps + (o.decode_tokens + 1) / 2.0;
  r.kv_bytes_per_decode_token = 2.0 * c.n_layers * c.kv_dim() * sizeof(float) * mean_context;
  return {};
}

// Iterations of B sequences decoding together, for each B of
// decode_batches: each sequence has its own prompt (decode_context tokens,
// prefilled together), then every iteration is one forward pass over one
// new token per sequence. Over contiguous F32 caches (one attention
// dispatch per sequence and layer) and over a paged F16 pool as the server
// runs it (--kv-dtype's default; one dispatch per layer for the batch),
// each step both ways. The batch sizes take turns (time_decode_batches),
// so a ratio between two of them compares the same minutes of the machine
// (its speed drifts by 20% and more from minute to minute on the shared
// VMs these figures come from).
class DecodeBatchRun {
 public:
  static constexpr std::int32_t block_tokens = 16;

  DecodeBatchRun(model::CpuForward& fwd, const ModelRunOptions& o, std::int32_t batch,
                 std::int32_t capacity)
      : fwd_(fwd), batch_(batch) {
    const auto& c = fwd.config();
    const std::int32_t blocks_per_seq = (capacity + block_tokens - 1) / block_tokens;
    blocks_.resize(static_cast<std::size_t>(batch));
    std::uint32_t next_block = 0;
    for (std::int32_t b = 0; b < batch; ++b) {
      kv_.push_back(fwd.make_kv_cache(capacity));
      auto ids = prompt_ids(o.decode_context + b, c.vocab_size);
      prompts_.emplace_back(ids.begin() + b, ids.end());  // a different prompt per sequence
      for (std::int32_t j = 0; j < blocks_per_seq; ++j) blocks_[std::size_t(b)].push_back(kv::BlockId{next_block++});
    }
    pool_ = std::make_unique<kv::KvPool>(
        fwd.kv_pool_config(std::int32_t(next_block), block_tokens, kv::KvDType::f16));
    tokens_.resize(static_cast<std::size_t>(batch));
    paged_tokens_.resize(static_cast<std::size_t>(batch));
  }

  Result<void> prefill() {
    std::vector<model::ForwardSequence> seqs;
    std::vector<model::PagedSequence> paged;
    for (std::int32_t b = 0; b < batch_; ++b) {
      seqs.push_back({prompts_[std::size_t(b)], 0, &kv_[std::size_t(b)], false});
      paged.push_back({prompts_[std::size_t(b)], 0, blocks_[std::size_t(b)], false});
    }
    auto out = fwd_.forward(seqs);
    if (!out) return out.error();
    auto paged_out = fwd_.forward_paged(paged, *pool_);
    if (!paged_out) return paged_out.error();
    // Each keeps its own tokens: F16 and F32 caches may pick different ones.
    for (std::int32_t b = 0; b < batch_; ++b) {
      tokens_[std::size_t(b)] = argmax(out->last(std::size_t(b)));
      paged_tokens_[std::size_t(b)] = argmax(paged_out->last(std::size_t(b)));
    }
    return {};
  }

  // One iteration each way; `timed`: kept for the medians.
  Result<void> step(bool timed) {
    std::vector<model::ForwardSequence> seqs;
    std::vector<model::PagedSequence> paged;
    for (std::int32_t b = 0; b < batch_; ++b) {
      auto& k = kv_[std::size_t(b)];
      seqs.push_back({std::span(&tokens_[std::size_t(b)], 1), k.size_tokens(), &k, false});
      // Both hold the same number of tokens: the prompt and one a step.
      paged.push_back({std::span(&paged_tokens_[std::size_t(b)], 1), k.size_tokens(),
                       blocks_[std::size_t(b)], false});
    }
    auto start = Clock::now();
    auto next = fwd_.forward(seqs);
    const double s = seconds_since(start);
    if (!next) return next.error();
    start = Clock::now();
    auto paged_next = fwd_.forward_paged(paged, *pool_);
    const double ps = seconds_since(start);
    if (!paged_next) return paged_next.error();
    for (std::int32_t b = 0; b < batch_; ++b) {
      tokens_[std::size_t(b)] = argmax(next->last(std::size_t(b)));
      paged_tokens_[std::size_t(b)] = argmax(paged_next->last(std::size_t(b)));
    }
    if (timed) {
      seconds_.push_back(s);
      paged_seconds_.push_back(ps);
    }
    return {};
  }

  DecodeBatchRow row(const ModelRunResult& r) {
    std::sort(seconds_.begin(), seconds_.end());
    std::sort(paged_seconds_.begin(), paged_seconds_.end());
    DecodeBatchRow row;
    row.batch = batch_;
    row.median_seconds = seconds_[seconds_.size() / 2];
    row.paged_median_seconds = paged_seconds_[paged_seconds_.size() / 2];
    row.flops = 2.0 * r.matrix_params * batch_;
    if (r.decode_bandwidth_median > 0)
      row.bytes_seconds = r.weight_bytes_per_token / (r.decode_bandwidth_median * 1e9);
    return row;
  }

 private:
  model::CpuForward& fwd_;
  std::int32_t batch_;
  std::vector<model::ContiguousKvCache> kv_;
  std::vector<std::vector<std::int32_t>> prompts_;
  std::vector<std::vector<kv::BlockId>> blocks_;
  std::unique_ptr<kv::KvPool> pool_;
  std::vector<std::int32_t> tokens_, paged_tokens_;
  std::vector<double> seconds_, paged_seconds_;
};

Result<std::vector<DecodeBatchRow>> time_decode_batches(model::CpuForward& fwd,
                                                        const ModelRunOptions& o,
                                                        const ModelRunResult& r) {
  // Rounds of `chunk` timed steps per batch size, each run after one
  // untimed step of its own: a batch size's steps stay back to back as in
  // serving (a step right after another batch size's finds other weights
  // and K/V in the caches: one sequence ran 1.5x slower that way), and
  // every batch size sees each round's minutes of the machine.
  constexpr std::int32_t chunk = 4;
  const std::int32_t rounds = std::max(1, (o.decode_batch_steps + chunk - 1) / chunk);
  const std::int32_t steps = rounds * (chunk + 1);
  std::vector<std::unique_ptr<DecodeBatchRun>> runs;
  for (std::int32_t batch : o.decode_batches) {
    runs.push_back(std::make_unique<DecodeBatchRun>(fwd, o, batch, o.decode_context + steps));
    if (auto ok = runs.back()->prefill(); !ok) return ok.error();
  }
  for (std::int32_t round = 0; round < rounds; ++round) {
    for (auto& run : runs) {
      for (std::int32_t i = 0; i <= chunk; ++i) {
        if (auto ok = run->step(i > 0); !ok) return ok.error();
      }
    }
  }
  std::vector<DecodeBatchRow> rows;
  for (auto& run : runs) rows.push_back(run->row(r));
  return rows;
}

// Attention FLOPs of `n` new tokens after `start` cached ones: QK^T and PV
// over each new token's context, per layer.
double attention_flops(const model::ModelConfig& c, double start, double n) {
  const double pairs = n * start + n * (n + 1) / 2;
  return c.n_layers * 4.0 * pairs * c.q_dim();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One mixed iteration, timed `decode_batch_steps` times (each after
// rewinding every cache to where it started), against one sequence
// prefilling as many tokens, timed as often, alternated with it.
Result<MixedIterationRow> time_mixed(model::CpuForward& fwd, const ModelRunOptions& o, const MixedShape& shape,
                                     const ModelRunResult& r) {
  const auto& c = fwd.config();
  const std::int32_t n_seqs = shape.decodes + shape.prefills;
  std::vector<model::ContiguousKvCache> kv;
  std::vector<std::vector<std::int32_t>> history, fed;
  std::vector<std::int32_t> base;
  for (std::int32_t s = 0; s < n_seqs; ++s) {
    const bool decoding = s < shape.decodes;
    const std::int32_t h = decoding ? o.decode_context : shape.history;
    const std::int32_t n = decoding ? 1 : shape.chunk;
    kv.push_back(fwd.make_kv_cache(h + n));
    auto ids = prompt_ids(h + n + s, c.vocab_size);
    ids.erase(ids.begin(), ids.begin() + s);  // a different sequence each
    history.emplace_back(ids.begin(), ids.begin() + h);
    fed.emplace_back(ids.begin() + h, ids.end());
    base.push_back(h);
  }
  // The histories, untimed (one pass each: a zero history has nothing to feed).
  for (std::int32_t s = 0; s < n_seqs; ++s) {
    if (history[std::size_t(s)].empty()) continue;
    model::ForwardSequence seq{history[std::size_t(s)], 0, &kv[std::size_t(s)], false};
    if (auto out = fwd.forward(std::span(&seq, 1)); !out) return out.error();
  }
  // The same sequences over a paged F16 pool, each on its own run of
  // blocks; their histories fed once, untimed.
  constexpr std::int32_t block_tokens = 16;
  std::vector<std::vector<kv::BlockId>> blocks(static_cast<std::size_t>(n_seqs));
  std::uint32_t next_block = 0;
  for (std::int32_t s = 0; s < n_seqs; ++s) {
    const auto len = std::int32_t(history[std::size_t(s)].size() + fed[std::size_t(s)].size());
    for (std::int32_t b = 0; b < (len + block_tokens - 1) / block_tokens; ++b)
      blocks[std::size_t(s)].push_back(kv::BlockId{next_block++});
  }
  kv::KvPool pool(fwd.kv_pool_config(std::int32_t(next_block), block_tokens, kv::KvDType::f16));
  for (std::int32_t s = 0; s < n_seqs; ++s) {
    if (history[std::size_t(s)].empty()) continue;
    model::PagedSequence seq{history[std::size_t(s)], 0, blocks[std::size_t(s)], false};
    if (auto out = fwd.forward_paged(std::span(&seq, 1), pool); !out) return out.error();
  }
  std::vector<model::PagedSequence> paged;
  for (std::int32_t s = 0; s < n_seqs; ++s)
    paged.push_back({fed[std::size_t(s)], base[std::size_t(s)], blocks[std::size_t(s)], false});
  const auto single_ids = prompt_ids(shape.tokens(), c.vocab_size);
  auto single_kv = fwd.make_kv_cache(shape.tokens());
  std::vector<double> mixed_seconds, single_seconds, paged_seconds;
  for (std::int32_t step = 0; step <= o.decode_batch_steps; ++step) {  // step 0: warm-up
    std::vector<model::ForwardSequence> seqs;
    for (std::int32_t s = 0; s < n_seqs; ++s) {
      kv[std::size_t(s)].truncate(base[std::size_t(s)]);
      seqs.push_back({fed[std::size_t(s)], base[std::size_t(s)], &kv[std::size_t(s)], false});
    }
    auto start = Clock::now();
    if (auto out = fwd.forward(seqs); !out) return out.error();
    const double m = seconds_since(start);
    single_kv.truncate(0);
    model::ForwardSequence one{single_ids, 0, &single_kv, false};
    start = Clock::now();
    if (auto out = fwd.forward(std::span(&one, 1)); !out) return out.error();
    const double p = seconds_since(start);
    start = Clock::now();  // rewriting the chunks' positions: nothing to rewind
    if (auto out = fwd.forward_paged(paged, pool); !out) return out.error();
    const double g = seconds_since(start);
    if (step > 0) {
      mixed_seconds.push_back(m);
      single_seconds.push_back(p);
      paged_seconds.push_back(g);
    }
  }
  MixedIterationRow row;
  row.shape = shape;
  row.median_seconds = median(mixed_seconds);
  row.single_prefill_seconds = median(single_seconds);
  row.paged_median_seconds = median(paged_seconds);
  const double per_layer_matrix = double(c.dim) * (2.0 * c.q_dim() + 2.0 * c.kv_dim()) +
                                  3.0 * double(c.dim) * c.ff_dim;
  row.flops = c.n_layers * 2.0 * shape.tokens() * per_layer_matrix +
              2.0 * double(c.dim) * c.vocab_size * n_seqs +  // one logits row per sequence
              shape.decodes * attention_flops(c, o.decode_context, 1) +
              shape.prefills * attention_flops(c, shape.history, shape.chunk);
  if (r.decode_bandwidth_median > 0)
    row.bytes_seconds = r.weight_bytes_per_token / (r.decode_bandwidth_median * 1e9);
  return row;
}

}  // namespace

namespace {

Result<void> load_and_time(const std::filesystem::path& file, const ModelRunOptions& options,
                           ModelRunResult& r) {
  r.file = file;
  auto weights = model::load_gguf(file);
  if (!weights) return weights.error();
  r.params = count_params(*weights);
  r.ff = weights->config.ff_dim;
  r.tied_output = weights->config.tied_output;
  r.weight_bytes_per_token = decode_weight_bytes(*weights);
  r.matrix_params = matrix_params(*weights);
  r.integer_matrix_share = integer_matrix_share(*weights);
  model::CpuForwardOptions fo;
  fo.n_threads = options.threads;
  fo.weights_on_huge_pages = options.weights_on_huge_pages;
  auto fwd = model::CpuForward::create(std::move(*weights), fo);
  if (!fwd) return fwd.error();
  r.weight_huge_page_bytes = double(fwd->weight_placement().huge_page_bytes);
  if (auto p = time_prefill(*fwd, options, r); !p) return p.error();
  if (auto d = time_decode(*fwd, options, r); !d) return d.error();
  if (!options.decode_batches.empty()) {
    auto rows = time_decode_batches(*fwd, options, r);
    if (!rows) return rows.error();
    r.decode_batches = std::move(*rows);
  }
  for (const MixedShape& shape : options.mixed) {
    auto row = time_mixed(*fwd, options, shape, r);
    if (!row) return row.error();
    r.mixed.push_back(*row);
  }
  return {};
}

}  // namespace

Result<ModelRunResult> run_model(const ModelShape& shape, model::DType dtype,
                                 const ModelRunOptions& options) {
  ModelRunResult r;
  r.shape = shape.name;
  r.dtype = model::dtype_name(dtype);
  const auto start = Clock::now();
  auto path = generate(shape, dtype, options);
  if (!path) return path.error();
  r.generate_seconds = seconds_since(start);
  if (auto t = load_and_time(*path, options, r); !t) return t.error();
  return r;
}

Result<ModelRunResult> run_model_file(const std::string& model, const std::string& dtype,
                                      const std::filesystem::path& file,
                                      const ModelRunOptions& options) {
  ModelRunResult r;
  r.shape = model;
  r.dtype = dtype;
  if (auto t = load_and_time(file, options, r); !t) return t.error();
  return r;
}

}  // namespace pensieve::bench
