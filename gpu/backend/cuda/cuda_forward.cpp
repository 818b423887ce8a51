#include "gpu/backend/cuda/cuda_forward.hpp"

#include "gpu/backend/cuda/cuda_check.hpp"
#include "gpu/backend/cuda/cuda_forward_internal.hpp"
#include "gpu/kernels/cuda/attention_launch.hpp"
#include "gpu/kernels/cuda/ops_launch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

namespace pensieve::backend::cuda {

namespace kcu = kernels::cuda;


CudaForward::CudaForward(DeviceWeights weights, CudaForwardOptions options)
    : weights_(std::move(weights)), options_(std::move(options)) {}

Result<std::unique_ptr<CudaForward>> CudaForward::create(const model::ModelWeights& weights,
                                                         CudaForwardOptions options) {
  auto device = upload_weights(weights, options.compute_dtype);
  if (!device) return device.error();
  std::unique_ptr<CudaForward> f(new CudaForward(std::move(*device), std::move(options)));
  if (auto ok = f->init(); !ok) return ok.error();
  return f;
}

Result<std::unique_ptr<CudaForward>> CudaForward::create_random(const model::ModelConfig& config,
                                                                CudaForwardOptions options,
                                                                std::uint64_t seed) {
  auto device = random_weights(config, options.compute_dtype, seed);
  if (!device) return device.error();
  std::unique_ptr<CudaForward> f(new CudaForward(std::move(*device), std::move(options)));
  if (auto ok = f->init(); !ok) return ok.error();
  return f;
}

Result<void> CudaForward::init() {
  const model::ModelConfig& c = weights_.config;
  if (options_.max_batch_tokens <= 0 || options_.max_logit_rows <= 0)
    return fail("cuda forward: max_batch_tokens and max_logit_rows must be positive");
  if (c.head_dim > kcu::kMaxHeadDim)
    return fail("cuda forward: head_dim above " + std::to_string(kcu::kMaxHeadDim));
  const kv::KvDType kv = kv_dtype();
  if (kv != weights_.dtype && !kv::kv_dtype_is_blocked(kv))
    return fail(std::string("cuda forward: KV dtype ") + kv::kv_dtype_name(kv) +
                " is neither the compute dtype nor q8_0 / fp8");
  if (kv::kv_dtype_is_blocked(kv) && c.kv_dim() % kv::kKvRowGranuleValues != 0)
    return fail(std::string("cuda forward: ") + kv::kv_dtype_name(kv) + " KV needs KV rows of a multiple of 32 values, not " +
                std::to_string(c.kv_dim()));
  int device = 0;
  PENSIEVE_CUDA_TRY(cudaGetDevice(&device));
  PENSIEVE_CUDA_TRY(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device));
  if (options_.stream == nullptr) {
    PENSIEVE_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    owns_stream_ = true;
  } else {
    stream_ = options_.stream;
  }
  auto cublas = CublasContext::create(stream_);
  if (!cublas) return cublas.error();
  cublas_ = std::move(*cublas);
  buffers_ = std::make_unique<Buffers>();
  Buffers& b = *buffers_;
  PENSIEVE_CUDA_TRY(cudaEventCreateWithFlags(&b.staged, cudaEventDisableTiming));
  const std::size_t t = std::size_t(options_.max_batch_tokens), r = std::size_t(options_.max_logit_rows);
  const std::size_t e = kv::kv_dtype_bytes(weights_.dtype), dim = std::size_t(c.dim),
                    q = std::size_t(c.q_dim()), qkv = q + 2 * std::size_t(c.kv_dim()),
                    ff = std::size_t(c.ff_dim), vocab = std::size_t(c.vocab_size);
  const std::size_t sizes[] = {t * dim * 4,  std::max(t, r) * dim * e, t * qkv * 4, t * q * e,
                               t * q * e,    t * 2 * ff * 4,           t * ff * e,  r * vocab * 4,
                               r * sizeof(kcu::DeviceSamplingParams),  r * 4};
  std::size_t total = 0;
  for (std::size_t s : sizes) total += (s + 255) / 256 * 256;
  auto arena = MemoryArena::create(total);
  if (!arena) return fail("cuda forward activations: " + arena.error().message);
  b.activations = std::move(*arena);
  void* p[std::size(sizes)];
  for (std::size_t i = 0; i < std::size(sizes); ++i) p[i] = b.activations.take(sizes[i]).value();
  b.x = static_cast<float*>(p[0]);
  b.xn = p[1];
  b.qkv = static_cast<float*>(p[2]);
  b.q = p[3];
  b.att = p[4];
  b.gate_up = static_cast<float*>(p[5]);
  b.h = p[6];
  b.logits = static_cast<float*>(p[7]);
  b.sample_params = static_cast<kcu::DeviceSamplingParams*>(p[8]);
  b.sampled = static_cast<std::int32_t*>(p[9]);
  auto host_small = MemoryBuffer::create(r * (sizeof(kcu::DeviceSamplingParams) + 4), MemoryKind::pinned_host);
  if (!host_small) return host_small.error();
  b.host_small = std::move(*host_small);
  if (options_.collective != nullptr) {
    const model::TpRank tp = options_.tp;
    if (options_.collective->ranks() != tp.ranks || options_.collective->rank() != tp.rank)
      return fail("cuda forward: the collective is not rank " + std::to_string(tp.rank) + " of " +
                  std::to_string(tp.ranks));
    const std::size_t slice = std::size_t(tp.vocab_slice(c.vocab_size));
    auto own = MemoryBuffer::create(r * slice * 4);
    if (!own) return own.error();
    b.logits_slice = std::move(*own);
    auto all = MemoryBuffer::create(std::size_t(tp.ranks) * r * slice * 4);
    if (!all) return all.error();
    b.gathered = std::move(*all);
  }
  if (options_.copy_logits_to_host) {
    auto host_logits = MemoryBuffer::create(r * vocab * 4, MemoryKind::pinned_host);
    if (!host_logits) return host_logits.error();
    b.host_logits = std::move(*host_logits);
  }
  return {};
}

CudaForward::~CudaForward() {
  if (stream_ != nullptr) {
    if (auto ok = check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); !ok)
      std::fprintf(stderr, "pensieve: ~CudaForward: %s\n", ok.error().message.c_str());
  }
  graphs_.clear();
  if (buffers_ && buffers_->staged != nullptr) (void)cudaEventDestroy(buffers_->staged);
  buffers_.reset();
  cublas_.reset();
  if (owns_stream_) (void)cudaStreamDestroy(stream_);
}

kv::KvPoolConfig CudaForward::kv_pool_config(std::int32_t num_blocks, std::int32_t block_tokens) const {
  const model::ModelConfig& c = weights_.config;
  kv::KvPoolConfig k;
  k.num_blocks = num_blocks;
  k.block_tokens = block_tokens;
  k.n_layers = c.n_layers;
  k.n_kv_heads = c.n_kv_heads;
  k.head_dim = c.head_dim;
  k.dtype = kv_dtype();
  k.tier = kv::Tier::device;
  k.poison_freed = false;
  return k;
}

Result<std::int32_t> CudaForward::kv_blocks_for_fraction(double gpu_memory_fraction,
                                                          std::int32_t block_tokens,
                                                          std::size_t reserve_bytes) const {
  auto info = query_device_memory();
  if (!info) return info.error();
  const kv::KvPoolConfig k = kv_pool_config(1, block_tokens);
  const std::size_t block_bytes = kv::kv_bytes_per_token(k) * std::size_t(block_tokens);
  const std::int64_t blocks = kv_blocks_for_budget(*info, gpu_memory_fraction, block_bytes, reserve_bytes);
  return std::int32_t(std::min<std::int64_t>(blocks, std::numeric_limits<std::int32_t>::max()));
}

Result<void> CudaForward::validate(std::span<const model::PagedSequence> batch,
                                   const CudaKvPool& pool) const {
  if (auto ok = model::validate_paged_batch(batch, weights_.config, pool.config()); !ok) return ok.error();
  if (pool.config().dtype != kv_dtype()) return fail("the KV pool's dtype is not the pass's KV dtype");
  if (pool.kind() != MemoryKind::device) return fail("the KV pool is not in device memory");
  std::size_t tokens = 0, logit_rows = 0;
  for (const model::PagedSequence& seq : batch) {
    tokens += seq.tokens.size();
    logit_rows += seq.all_logits ? seq.tokens.size() : 1;
  }
  if (tokens > std::size_t(options_.max_batch_tokens))
    return fail("the batch has " + std::to_string(tokens) + " tokens, more than max_batch_tokens " +
                std::to_string(options_.max_batch_tokens));
  if (logit_rows > std::size_t(options_.max_logit_rows))
    return fail("the batch asks for " + std::to_string(logit_rows) + " logits rows, more than " +
                std::to_string(options_.max_logit_rows));
  return {};
}

Result<void> CudaForward::upload_batch(const BatchLayout& layout, std::byte* device_meta) {
  Buffers& b = *buffers_;
  // The previous batch's copy may still read the staging buffer.
  PENSIEVE_CUDA_TRY(cudaEventSynchronize(b.staged));
  if (b.staging.bytes() < layout.bytes) {
    auto staging = MemoryBuffer::create(std::max(layout.bytes, 2 * b.staging.bytes()), MemoryKind::pinned_host);
    if (!staging) return staging.error();
    b.staging = std::move(*staging);
  }
  pack_batch(host_batch_, layout, static_cast<std::byte*>(b.staging.data()));
  PENSIEVE_CUDA_TRY(cudaMemcpyAsync(device_meta, b.staging.data(), layout.bytes, cudaMemcpyHostToDevice, stream_));
  PENSIEVE_CUDA_TRY(cudaEventRecord(b.staged, stream_));
  return {};
}

// Grows `buffer` to at least `bytes` once the stream is idle (eager runs only).
static Result<void> ensure_device_bytes(MemoryBuffer& buffer, std::size_t bytes, cudaStream_t stream) {
  if (buffer.bytes() >= bytes) return {};
  PENSIEVE_CUDA_TRY(cudaStreamSynchronize(stream));
  buffer = MemoryBuffer();
  auto grown = MemoryBuffer::create(std::max(bytes, std::size_t(4096)));
  if (!grown) return grown.error();
  buffer = std::move(*grown);
  return {};
}

static std::size_t partial_bytes(const kernels::AttentionPlan& plan, const model::ModelConfig& c) {
  if (plan.merges.empty()) return 0;
  return plan.items.size() * std::size_t(c.n_heads) * std::size_t(c.head_dim + 2) * sizeof(float);
}

Result<void> CudaForward::run_eager(const CudaKvPool& pool) {
  Buffers& b = *buffers_;
  const BatchLayout layout = BatchLayout::of(host_batch_);
  if (auto ok = ensure_device_bytes(b.meta, layout.bytes, stream_); !ok) return ok;
  if (auto ok = ensure_device_bytes(b.partial, partial_bytes(host_batch_.plan, weights_.config), stream_); !ok)
    return ok;
  if (auto ok = upload_batch(layout, static_cast<std::byte*>(b.meta.data())); !ok) return ok;
  ++stats_.eager_runs;
  return enqueue_pass(layout, static_cast<const std::byte*>(b.meta.data()),
                      static_cast<float*>(b.partial.data()), pool);
}

Result<model::ForwardOutput> CudaForward::forward_paged(std::span<const model::PagedSequence> batch,
                                                        CudaKvPool& pool) {
  if (auto ok = validate(batch, pool); !ok) return ok.error();
  if (batch.empty()) return model::ForwardOutput{weights_.config.vocab_size, {}, {0}, {}};
  const std::int32_t bt = pool.config().block_tokens;
  const std::int32_t graph_stride = (weights_.config.max_context + bt - 1) / bt;
  const auto batch_size = std::int32_t(batch.size());
  bool graphable = !gates_.armed() && options_.collective == nullptr && std::find(options_.graph_batch_sizes.begin(), options_.graph_batch_sizes.end(),
                                                batch_size) != options_.graph_batch_sizes.end();
  for (const auto& seq : batch) {
    graphable = graphable && seq.tokens.size() == 1 && !seq.all_logits &&
                seq.blocks.size() <= std::size_t(graph_stride);
  }
  build_host_batch(batch, bt, weights_.config.vocab_size, graphable ? graph_stride : 0, host_batch_);
  bool ran = false;
  if (graphable) {
    auto graphed = run_graph(pool);
    if (!graphed) return graphed.error();
    ran = *graphed;
    if (!ran) build_host_batch(batch, bt, weights_.config.vocab_size, 0, host_batch_);
  }
  if (!ran) {
    kernels::AttentionPlanOptions o;
    o.workers = sm_count_;
    o.thresholds = options_.decode_thresholds;
    auto plan = kernels::plan_paged_attention({host_batch_.q_start, host_batch_.context},
                                              weights_.config.n_kv_heads, o);
    if (!plan) return plan.error();
    host_batch_.plan = std::move(*plan);
    auto ok = run_eager(pool);
    gates_.clear();  // waited on (enqueued) or abandoned with the pass
    if (!ok) return ok.error();
  }
  model::ForwardOutput out = std::move(host_batch_.output);
  if (auto ok = finish(out); !ok) return ok.error();
  return out;
}

Result<void> CudaForward::finish(model::ForwardOutput& out) {
  const std::size_t rows = out.rows(), vocab = std::size_t(weights_.config.vocab_size);
  last_logit_rows_ = std::int32_t(rows);
  if (!options_.copy_logits_to_host) return {};
  Buffers& b = *buffers_;
  PENSIEVE_CUDA_TRY(cudaMemcpyAsync(b.host_logits.data(), b.logits, rows * vocab * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream_));
  PENSIEVE_CUDA_TRY(cudaStreamSynchronize(stream_));
  const auto* host = static_cast<const float*>(b.host_logits.data());
  out.logits.assign(host, host + rows * vocab);
  return {};
}

Result<std::vector<std::int32_t>> CudaForward::sample(
    std::span<const kcu::DeviceSamplingParams> rows) {
  if (std::int32_t(rows.size()) != last_logit_rows_)
    return fail("sample: " + std::to_string(rows.size()) + " rows of parameters for " +
                std::to_string(last_logit_rows_) + " rows of logits");
  if (rows.empty()) return std::vector<std::int32_t>{};
  Buffers& b = *buffers_;
  auto* params = static_cast<kcu::DeviceSamplingParams*>(b.host_small.data());
  auto* tokens = reinterpret_cast<std::int32_t*>(params + options_.max_logit_rows);
  std::copy(rows.begin(), rows.end(), params);
  const auto n = std::int32_t(rows.size());
  const std::int32_t vocab = weights_.config.vocab_size;
  PENSIEVE_CUDA_TRY(cudaMemcpyAsync(b.sample_params, params, rows.size_bytes(), cudaMemcpyHostToDevice, stream_));
  PENSIEVE_CUDA_TRY(kcu::launch_sample(b.logits, vocab, n, vocab, b.sample_params, b.sampled, stream_));
  PENSIEVE_CUDA_TRY(cudaMemcpyAsync(tokens, b.sampled, std::size_t(n) * 4, cudaMemcpyDeviceToHost, stream_));
  PENSIEVE_CUDA_TRY(cudaStreamSynchronize(stream_));
  return std::vector<std::int32_t>(tokens, tokens + n);
}

}  // namespace pensieve::backend::cuda
