#include "gpu/backend/cuda/cuda_paged_forward.hpp"

#include "gpu/backend/cuda/cuda_check.hpp"
#include "gpu/backend/cuda/cuda_tier_gather.hpp"
#include "gpu/backend/cuda/cuda_tp_paged_forward.hpp"
#include "gpu/kv/kv_tier_memory.hpp"
#include "runtime/cuda/cuda_stream.hpp"

#include <string>

namespace pensieve::backend::cuda {

Result<void> CudaPagedForward::poison(kv::BlockId block) {
  if (block.value >= std::uint32_t(pool_.config().num_blocks)) return fail("cuda kv poison: block id out of range");
  // All-ones bytes are NaN in F16 and BF16 alike, and make every Q8_0 (F16)
  // and FP8 (F32) block scale a NaN.
  const std::size_t bytes = pool_.block_bytes_per_layer();
  for (std::int32_t l = 0; l < pool_.config().n_layers; ++l) {
    auto* base = static_cast<std::byte*>(pool_.layer(l).data) + bytes * block.value;
    PENSIEVE_CUDA_TRY(cudaMemsetAsync(base, 0xFF, bytes, forward_->stream()));
  }
  return {};
}

Result<void> CudaPagedForward::copy_prefix(kv::BlockId src, kv::BlockId dst, std::int32_t /*tokens*/) {
  // The whole block: slots past the prefix are written by dst's sequence
  // before anything reads them, and one copy per layer beats one per token.
  const BlockCopy copy{src, dst};
  return copy_blocks_async(pool_, pool_, std::span(&copy, 1), forward_->stream());
}

Result<std::optional<KvTierLinks>> CudaPagedForward::device_tier_links(std::int32_t host_slots) {
  int device = 0;
  PENSIEVE_CUDA_TRY(cudaGetDevice(&device));
  KvTierLinks links;
  std::vector<kv::PagedKvView> layers;
  for (std::int32_t l = 0; l < pool_.config().n_layers; ++l) layers.push_back(pool_.layer(l));
  links.device = kv::tier_memory(layers);
  // Pinned: cudaMemcpyAsync from pageable memory is staged and synchronous.
  kv::KvPoolMemory pinned;
  pinned.allocate = [](std::size_t bytes) -> void* {
    void* p = nullptr;
    return cudaHostAlloc(&p, bytes, cudaHostAllocPortable) == cudaSuccess ? p : nullptr;
  };
  pinned.release = [](void* p) {
    // A failure here is a device fault at teardown: nothing to recover.
    [[maybe_unused]] const cudaError_t e = cudaFreeHost(p);
  };
  try {
    links.host = std::make_unique<kv::KvPool>(host_tier_config(pool_.config(), host_slots), std::move(pinned));
  } catch (const std::bad_alloc&) {
    return fail("--kv-host-mb: cudaHostAlloc of " + std::to_string(host_slots) + " pinned host KV chunks failed");
  }
  auto in = rt::CudaStream::create(device, "copy.h2d");
  if (!in) return in.error();
  auto out = rt::CudaStream::create(device, "copy.d2h");
  if (!out) return out.error();
  links.copy_in = std::move(*in);
  links.copy_out = std::move(*out);
  // Scattered small runs through one kernel launch, large ones as DMA
  // (kernels/swap_copy_plan.hpp's default thresholds until the device table
  // says otherwise).
  links.gather = std::make_unique<CudaTierGather>();
  return std::optional<KvTierLinks>(std::move(links));
}

Result<void> CudaPagedForward::wait_on_device(const rt::Event& event) {
  if (event.is_complete()) return {};
  if (event.device_event() == nullptr) {
    event.wait_blocking();
    return {};
  }
  PENSIEVE_CUDA_TRY(cudaStreamWaitEvent(forward_->stream(), static_cast<cudaEvent_t>(event.device_event()), 0));
  return {};
}

Result<model::ForwardOutput> CudaPagedForward::forward_paged(std::span<const model::PagedSequence> batch,
                                                             const model::CpuForward::LayerHook& /*before_layer*/) {
  return forward_->forward_paged(batch, pool_);
}

Result<std::unique_ptr<PagedForward>> make_cuda_paged_forward(const model::ModelWeights& weights,
                                                              const PagedForwardOptions& options) {
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    return fail(std::string("--backend cuda: no CUDA device (") +
                (e == cudaSuccess ? "none found" : cudaGetErrorString(e)) + ")");
  }
  if (options.tp > 1) {
    auto tp = CudaTpPagedForward::create(weights, options);
    if (!tp) return tp.error();
    return std::unique_ptr<PagedForward>(std::move(*tp));
  }
  CudaForwardOptions o;
  // f32 asks for bf16 (the pass computes in f16 or bf16); quantised KV keeps
  // the BF16 compute dtype (its range).
  o.compute_dtype = options.kv_dtype == kv::KvDType::f16 ? kv::KvDType::f16 : kv::KvDType::bf16;
  if (kv::kv_dtype_is_blocked(options.kv_dtype)) o.kv_dtype = options.kv_dtype;
  o.max_batch_tokens = std::max(options.max_batch_tokens, 1);
  o.decode_thresholds = options.decode_thresholds;
  auto forward = CudaForward::create(weights, std::move(o));
  if (!forward) return fail("--backend cuda: " + forward.error().message);
  kv::KvPoolConfig pool = (*forward)->kv_pool_config(1, options.block_tokens);
  pool.tier = kv::Tier::device;
  auto blocks = pool_blocks(options, kv::kv_bytes_per_token(pool) * std::size_t(pool.block_tokens));
  if (!blocks) return blocks.error();
  pool.num_blocks = *blocks;
  auto device_pool = CudaKvPool::create(pool);
  if (!device_pool) return fail("--backend cuda: " + device_pool.error().message);
  return std::unique_ptr<PagedForward>(
      std::make_unique<CudaPagedForward>(std::move(*forward), std::move(*device_pool)));
}

}  // namespace pensieve::backend::cuda
