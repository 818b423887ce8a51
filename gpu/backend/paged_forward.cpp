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

Result<std::unique_ptr<PagedForward>> make_cpu(model::ModelWeights weights, const PagedForwardOptions& o) {
  if (o.tp == 1) {
    auto forward = model::CpuForward::create(std::move(weights), {.n_threads = o.n_threads});
    if (!forward) return forward.error();
    kv::KvPoolConfig pool = forward->kv_pool_config(1, o.block_tokens, o.kv_dtype);
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
  auto blocks = pool_blocks(o, block_bytes(pool));
  if (!blocks) return blocks.error();
  pool.num_blocks = *blocks;
  return std::unique_ptr<PagedForward>(std::make_unique<TpPagedForward>(std::move(*forward), pool));
}

}  // namespace

Result<std::unique_ptr<PagedForward>> make_paged_forward(model::ModelWeights weights,
                                                         const PagedForwardOptions& options) {
  if (options.tp < 1) return fail("--tp: " + std::to_string(options.tp) + " is not a positive rank count");
  if (auto ok = model::check_tensor_parallel(weights.config, options.tp); !ok) {
    return fail("--tp " + std::to_string(options.tp) + ": " + ok.error().message);
  }
  if (options.backend == BackendKind::cpu) return make_cpu(std::move(weights), options);
#ifdef PENSIEVE_HAVE_CUDA
  return cuda::make_cuda_paged_forward(weights, options);
#else
  return fail("--backend cuda: this build has no CUDA backend (nvcc was not found when it was configured)");
#endif
}

}  // namespace pensieve::backend
