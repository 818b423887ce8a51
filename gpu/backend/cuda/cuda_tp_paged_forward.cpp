#include "gpu/backend/cuda/cuda_tp_paged_forward.hpp"

#include "gpu/backend/cuda/cuda_check.hpp"
#include "gpu/model/tp_plan.hpp"
#include "gpu/model/tp_shard.hpp"

#include <algorithm>
#include <string>

namespace pensieve::backend::cuda {

Result<std::unique_ptr<CudaTpPagedForward>> CudaTpPagedForward::create(const model::ModelWeights& weights,
                                                                       const PagedForwardOptions& options) {
  if (auto ok = model::check_tensor_parallel(weights.config, options.tp); !ok) return fail("--backend cuda: " + ok.error().message);
  int device_count = 0;
  PENSIEVE_CUDA_TRY(cudaGetDeviceCount(&device_count));
  auto devices = model::tp_devices(options.tp, device_count);
  if (!devices) return devices.error();
  int caller_device = 0;
  PENSIEVE_CUDA_TRY(cudaGetDevice(&caller_device));
  std::unique_ptr<CudaTpPagedForward> f(new CudaTpPagedForward(weights.config));
  f->ranks_.resize(devices->size());
  std::vector<cudaStream_t> streams;
  for (std::size_t r = 0; r < devices->size(); ++r) {
    Rank& rank = f->ranks_[r];
    rank.device = (*devices)[r];
    PENSIEVE_CUDA_TRY(cudaSetDevice(rank.device));
    PENSIEVE_CUDA_TRY(cudaStreamCreateWithFlags(&rank.stream, cudaStreamNonBlocking));
    streams.push_back(rank.stream);
  }
  PENSIEVE_CUDA_TRY(cudaSetDevice(caller_device));
  // Every communicator from this thread (ncclCommInitAll): no rank can be
  // left waiting in an init the others never reach.
  auto group = NcclCollective::create_group(*devices, streams);
  if (!group) return fail("--backend cuda --tp " + std::to_string(options.tp) + ": " + group.error().message);
  for (std::size_t r = 0; r < group->size(); ++r) f->ranks_[r].nccl = std::move((*group)[r]);
  f->threads_ = std::make_unique<model::TpRankThreads>(options.tp);
  // Each rank uploads its shard from its own thread, on its device: no
  // collective runs here, so a rank that fails leaves none waiting.
  std::vector<std::int32_t> blocks(f->ranks_.size(), 0);
  auto made = f->on_every_rank([&](Rank& rank) -> Result<void> {
    const model::TpRank tp{rank.nccl->rank(), options.tp};
    auto shard = model::shard_weights(weights, tp);
    if (!shard) return shard.error();
    CudaForwardOptions o;
    o.compute_dtype = options.kv_dtype == kv::KvDType::f16 ? kv::KvDType::f16 : kv::KvDType::bf16;
    if (kv::kv_dtype_is_blocked(options.kv_dtype)) o.kv_dtype = options.kv_dtype;
    o.max_batch_tokens = std::max(options.max_batch_tokens, 1);
    o.decode_thresholds = options.decode_thresholds;
    o.graph_batch_sizes.clear();  // NCCL calls run eagerly
    o.stream = rank.stream;
    o.tp = tp;
    o.collective = rank.nccl.get();
    auto forward = CudaForward::create(*shard, std::move(o));
    if (!forward) return fail("rank " + std::to_string(tp.rank) + ": " + forward.error().message);
    rank.forward = std::move(*forward);
    kv::KvPoolConfig pool = rank.forward->kv_pool_config(1, options.block_tokens);
    auto n = pool_blocks(options, kv::kv_bytes_per_token(pool) * std::size_t(pool.block_tokens));
    if (!n) return n.error();
    pool.num_blocks = *n;
    blocks[std::size_t(tp.rank)] = *n;
    auto device_pool = CudaKvPool::create(pool);
    if (!device_pool) return fail("rank " + std::to_string(tp.rank) + ": " + device_pool.error().message);
    rank.pool.emplace(std::move(*device_pool));
    return {};
  });
  if (!made) return fail("--backend cuda --tp " + std::to_string(options.tp) + ": " + made.error().message);
  for (std::int32_t b : blocks) {
    // Every rank's pool has the same layout, so the same budget gives the same count.
    if (b != blocks.front()) return fail("--backend cuda: the ranks' KV pools differ in size");
  }
  return f;
}

CudaTpPagedForward::~CudaTpPagedForward() {
  for (Rank& rank : ranks_) {
    if (cudaSetDevice(rank.device) != cudaSuccess) continue;  // the device is gone: nothing to free on it
    rank.pool.reset();
    rank.forward.reset();
    rank.nccl.reset();
    if (rank.stream != nullptr) (void)cudaStreamDestroy(rank.stream);
  }
}

Result<void> CudaTpPagedForward::on_every_rank(const std::function<Result<void>(Rank&)>& part) {
  std::vector<Result<void>> results(ranks_.size());
  threads_->run([&](std::int32_t r) {
    Rank& rank = ranks_[std::size_t(r)];
    if (const cudaError_t e = cudaSetDevice(rank.device); e != cudaSuccess) {
      results[std::size_t(r)] = check_cuda(e, "cudaSetDevice");
      return;
    }
    results[std::size_t(r)] = part(rank);
  });
  for (auto& result : results) {
    if (!result) return result;
  }
  return {};
}

Result<void> CudaTpPagedForward::poison(kv::BlockId block) {
  return on_every_rank([&](Rank& rank) -> Result<void> {
    if (block.value >= std::uint32_t(rank.pool->config().num_blocks)) return fail("cuda kv poison: block id out of range");
    // All-ones bytes: NaN in F16 and BF16, and NaN Q8_0 / FP8 block scales.
    const std::size_t bytes = rank.pool->block_bytes_per_layer();
    for (std::int32_t l = 0; l < rank.pool->config().n_layers; ++l) {
      auto* base = static_cast<std::byte*>(rank.pool->layer(l).data) + bytes * block.value;
      PENSIEVE_CUDA_TRY(cudaMemsetAsync(base, 0xFF, bytes, rank.stream));
    }
    return {};
  });
}

Result<void> CudaTpPagedForward::copy_prefix(kv::BlockId src, kv::BlockId dst, std::int32_t /*tokens*/) {
  const BlockCopy copy{src, dst};  // the whole block, as CudaPagedForward::copy_prefix
  return on_every_rank([&](Rank& rank) { return copy_blocks_async(*rank.pool, *rank.pool, std::span(&copy, 1), rank.stream); });
}

Result<model::ForwardOutput> CudaTpPagedForward::forward_paged(std::span<const model::PagedSequence> batch,
                                                               const model::CpuForward::LayerHook& /*before_layer*/) {
  // Every rank validates the same batch against pools of one layout, so they
  // all fail before their first collective or none does.
  std::vector<std::optional<Result<model::ForwardOutput>>> outputs(ranks_.size());
  auto ran = on_every_rank([&](Rank& rank) -> Result<void> {
    auto& out = outputs[std::size_t(rank.nccl->rank())];
    out.emplace(rank.forward->forward_paged(batch, *rank.pool));
    if (!*out) return out->error();
    return {};
  });
  if (!ran) return ran.error();
  return std::move(*outputs.front());
}

}  // namespace pensieve::backend::cuda
