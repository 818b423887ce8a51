#include "gpu/backend/paged_forward.hpp"

#include "gpu/backend/cpu/cpu_paged_forward.hpp"
#include "gpu/model/tp_shard.hpp"
#ifdef PENSIEVE_HAVE_CUDA
#include "gpu/backend/cuda/cuda_paged_forward.hpp"
#endif

#include <algorithm>
#include <thread>

namespace pensieve::backend {

std::string_view backend_name(BackendKind kind) { return kind == BackendKind::cuda ? "cuda" : "cpu"; }

Result<std::int32_t> pool_blocks(const PagedForwardOptions& options, std::size_t block_bytes) {
  if (options.num_blocks > 0) return options.num_blocks;
  const std::size_t blocks = block_bytes == 0 ? 0 : options.kv_budget_bytes / block_bytes;
  if (blocks < 1) return fail("--kv-device-mb is too small for one KV block of this model");
  return std::int32_t(std::min<std::size_t>(blocks, std::size_t(1) << 30));
}

namespace {

std::size_t block_bytes(const kv::KvPoolConfig& pool) {
  return kv::kv_bytes_per_token(pool) * std::size_t(pool.block_tokens);
}

// Q8_0 and FP8 KV quantise each token's K and V row (one rank's KV heads) in
// blocks of 64 and 32 values; a Q8_0 row may end with a block of 32
// (kv/paged_kv_view.hpp), so both need rows of whole 32-value granules.
Result<void> check_kv_rows(const kv::KvPoolConfig& pool) {
  const std::int64_t row = std::int64_t(pool.n_kv_heads) * pool.head_dim;
  if (!kv::kv_dtype_is_blocked(pool.dtype) || row % kv::kKvRowGranuleValues == 0) return {};
  return fail(std::string("--kv-dtype ") + kv::kv_dtype_name(pool.dtype) + ": a token's KV row on one rank has " + std::to_string(row) +
              " values (KV heads x head_dim), not a multiple of 32; use --kv-dtype f16");
}

Result<std::unique_ptr<PagedForward>> make_cpu(model::ModelWeights weights, const PagedForwardOptions& o) {
  if (o.tp == 1) {
    auto forward = model::CpuForward::create(std::move(weights), {.n_threads = o.n_threads});
    if (!forward) return forward.error();
    kv::KvPoolConfig pool = forward->kv_pool_config(1, o.block_tokens, o.kv_dtype);
    if (auto ok = check_kv_rows(pool); !ok) return ok.error();
    auto blocks = pool_blocks(o, block_bytes(pool));
    if (!blocks) return blocks.error();
    pool.num_blocks = *blocks;
    return std::unique_ptr<PagedForward>(std::make_unique<CpuPagedForward>(std::move(*forward), pool));
  }
  // The cores are shared between the ranks (each rank has its own pool of
  // compute threads).
  const std::size_t cores = o.n_threads > 0 ? o.n_threads : std::max(1u, std::thread::hardware_concurrency());
  const std::size_t per_rank = std::max<std::size_t>(1, cores / std::size_t(o.tp));
  auto forward = model::TpForward::create(weights, o.tp, {.n_threads = per_rank});
  if (!forward) return forward.error();
  kv::KvPoolConfig pool = forward->kv_pool_config(1, o.block_tokens, o.kv_dtype);
  if (auto ok = check_kv_rows(pool); !ok) return ok.error();
  auto blocks = pool_blocks(o, block_bytes(pool));
  if (!blocks) return blocks.error();
  pool.num_blocks = *blocks;
  return std::unique_ptr<PagedForward>(std::make_unique<TpPagedForward>(std::move(*forward), pool));
}

// What of the config the CUDA pass does not do (it runs the llama/qwen2
// decoder only); empty when it runs the model.
std::string cuda_missing_feature(const model::ModelConfig& c) {
  if (c.qk_norm) return "per-head q/k norms";
  if (c.post_norms) return "post-attention and post-MLP norms";
  if (c.ffn_activation != model::FfnActivation::silu) return "a GELU MLP";
  if (c.embedding_scale != 1.0f) return "embedding scaling";
  if (c.sliding_window > 0) return "sliding-window attention";
  if (c.attn_logit_softcap > 0.0f || c.final_logit_softcap > 0.0f) return "logit soft-capping";
  if (c.attention_scale > 0.0f) return "a softmax scale other than 1/sqrt(head_dim)";
  if (c.rope_scaling.attn_factor != 1.0f) return "a rope attention factor";
  return "";
}

}  // namespace

Result<std::unique_ptr<PagedForward>> make_paged_forward(model::ModelWeights weights,
                                                         const PagedForwardOptions& options) {
  if (options.tp < 1) return fail("--tp: " + std::to_string(options.tp) + " is not a positive rank count");
  if (auto ok = model::check_tensor_parallel(weights.config, options.tp); !ok) {
    return fail("--tp " + std::to_string(options.tp) + ": " + ok.error().message);
  }
  if (options.backend == BackendKind::cpu) return make_cpu(std::move(weights), options);
  if (auto missing = cuda_missing_feature(weights.config); !missing.empty()) {
    return fail("--backend cuda: the CUDA pass does not implement " + missing + " (" + weights.config.architecture +
                "); run this model with --backend cpu");
  }
#ifdef PENSIEVE_HAVE_CUDA
  return cuda::make_cuda_paged_forward(weights, options);
#else
  return fail("--backend cuda: this build has no CUDA backend (nvcc was not found when it was configured)");
#endif
}

}  // namespace pensieve::backend
