#pragma once
// PagedForward: what the GPU worker needs of a compute backend, whatever it
// is: one model's forward pass over a paged KV pool it owns, on one rank
// (CpuForward, CudaForward) or on N tensor-parallel ranks (TpForward), each
// rank with its own pool of the same block ids. The worker (and through it
// the scheduler) sees one pool of blocks: every operation here applies the
// same block ids to every rank's pool, so the pools stay in step.
//
// make_paged_forward() picks the backend (--backend, --tp) and sizes the
// pools from a budget. Implementations: gpu/backend/cpu/ (CPU, one rank or
// tensor-parallel) and gpu/backend/cuda/cuda_paged_forward.hpp.
//
// Not thread-safe: the GPU worker calls it from its compute stream's thread.
#include "gpu/backend/kv_tier_links.hpp"
#include "gpu/kernels/decode_plan.hpp"
#include "gpu/kv/block_id.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/model_weights.hpp"
#include "runtime/error.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace pensieve::backend {

enum class BackendKind : std::uint8_t { cpu, cuda };

std::string_view backend_name(BackendKind kind);

class PagedForward {
 public:
  virtual ~PagedForward() = default;

  virtual const model::ModelConfig& config() const = 0;  // the whole model's
  // One rank's pool (num_blocks is the scheduler's pool; heads are per rank).
  virtual const kv::KvPoolConfig& pool_config() const = 0;
  virtual std::int32_t ranks() const = 0;
  // The pool as a host kv::KvPool the swap engine can copy blocks of; null
  // when the KV lives elsewhere (device memory) or on several ranks.
  virtual std::shared_ptr<kv::KvPool> host_pool() const = 0;
  // Whether a host KV tier can be attached: through host_pool() or through
  // device_tier_links().
  virtual bool supports_host_tier() const { return host_pool() != nullptr; }
  // The swap engine's links where the device tier is not host memory (CUDA:
  // device memory, a pinned host tier of `host_slots` chunks, a CUDA copy
  // stream per direction). nullopt: the backend's KV is host_pool(), copied
  // by CPU streams (the engine builds those), or there is no host tier
  // (host_pool() null too). Errors: the pinned allocation or a stream failed.
  virtual Result<std::optional<KvTierLinks>> device_tier_links(std::int32_t host_slots) {
    (void)host_slots;
    return std::optional<KvTierLinks>{};
  }

  // True: the next forward_paged makes the device wait for each layer's
  // swap-in event itself (gate_next_pass), and before_layer is not the place
  // to wait (CUDA). False: the caller waits in before_layer (CPU).
  virtual bool gates_on_device() const { return false; }
  // The swap-in events of the next pass, one per layer (gates_on_device()).
  virtual void gate_next_pass(std::vector<rt::Event> layer_ready) { (void)layer_ready; }
  // Work enqueued after this (copies, poisoning, the next pass) waits for
  // `event` on the device (gates_on_device()).
  virtual Result<void> wait_on_device(const rt::Event& event) {
    (void)event;
    return {};
  }

  // Fills the block with NaN on every rank (a stale read shows).
  virtual Result<void> poison(kv::BlockId block) = 0;
  // Copies token slots [0, tokens) of src into dst on every rank.
  virtual Result<void> copy_prefix(kv::BlockId src, kv::BlockId dst, std::int32_t tokens) = 0;
  // Runs the batch; logits on the host. `before_layer` runs on the calling
  // thread before layer l where the backend can (CPU; rank 0 under tensor
  // parallelism); the CUDA backend enqueues the whole pass and never calls it.
  virtual Result<model::ForwardOutput> forward_paged(std::span<const model::PagedSequence> batch,
                                                     const model::CpuForward::LayerHook& before_layer) = 0;

  // Host work between passes, split over the backend's host threads where it
  // has some (the CPU pass's pool), else on the calling thread:
  // body(begin, end, thread) covers [begin, end) of n items, thread <
  // host_threads(); `cost` (~operations in all) below a fork's worth runs
  // serially. Called from the thread that runs the passes.
  using HostBody = std::function<void(std::size_t, std::size_t, std::size_t)>;
  virtual std::size_t host_threads() const { return 1; }
  virtual void for_each_host(std::size_t n, const HostBody& body, double cost) {
    (void)cost;
    if (n > 0) body(0, n, 0);
  }
};

struct PagedForwardOptions {
  BackendKind backend = BackendKind::cpu;
  std::int32_t tp = 1;             // tensor-parallel ranks
  std::size_t n_threads = 0;       // CPU threads in all (split between ranks); 0: every core
  std::int32_t block_tokens = 32;
  // f32, f16, bf16, q8_0 or fp8 (q8_0, fp8: a rank's KV row a multiple of 32
  // values); CUDA computes in f16 or bf16 (f32 asks for bf16).
  kv::KvDType kv_dtype = kv::KvDType::f32;
  std::size_t kv_budget_bytes = std::size_t(512) << 20;  // per rank
  std::int32_t num_blocks = 0;     // > 0: exactly this many blocks instead of the budget
  std::int32_t max_batch_tokens = 512;  // CUDA: activation buffers' size
  kernels::DecodePlanThresholds decode_thresholds;  // CUDA: the decode plan's (--decode-plan)
};

// Errors: a --tp that does not divide the model's heads, KV heads or ff_dim;
// a budget smaller than one block; --backend cuda on a build without CUDA or
// a machine without a device (one line each).
Result<std::unique_ptr<PagedForward>> make_paged_forward(model::ModelWeights weights,
                                                         const PagedForwardOptions& options);

// Blocks of `block_bytes` that fit the options' budget (or their num_blocks).
Result<std::int32_t> pool_blocks(const PagedForwardOptions& options, std::size_t block_bytes);

}  // namespace pensieve::backend
