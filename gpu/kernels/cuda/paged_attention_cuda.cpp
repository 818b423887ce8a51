#include "gpu/kernels/cuda/paged_attention_cuda.hpp"

#include <string>

namespace pensieve::kernels::cuda {
namespace {

template <class T>
Result<void> grow(T*& ptr, std::size_t& capacity, std::size_t wanted, const char* what) {
  if (wanted <= capacity) return {};
  if (ptr != nullptr) {
    if (auto ok = check_cuda(cudaFree(ptr), what); !ok) return ok;
    ptr = nullptr;
    capacity = 0;
  }
  void* p = nullptr;
  if (auto ok = check_cuda(cudaMalloc(&p, wanted * sizeof(T)), what); !ok) return ok;
  ptr = static_cast<T*>(p);
  capacity = wanted;
  return {};
}

}  // namespace

Result<void> check_cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  return fail(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

AttentionDeviceWorkspace::~AttentionDeviceWorkspace() {
  // Errors here cannot be returned; a failing cudaFree means the context is gone.
  if (items_ != nullptr) (void)cudaFree(items_);
  if (merges_ != nullptr) (void)cudaFree(merges_);
  if (partial_ != nullptr) (void)cudaFree(partial_);
}

Result<void> AttentionDeviceWorkspace::reserve(std::size_t items, std::size_t merges,
                                               std::size_t partial_floats) {
  if (auto ok = grow(items_, items_cap_, items, "attention workspace: items"); !ok) return ok;
  if (auto ok = grow(merges_, merges_cap_, merges, "attention workspace: merges"); !ok) return ok;
  return grow(partial_, partial_cap_, partial_floats, "attention workspace: partial states");
}

Result<void> paged_attention(const PagedAttentionParams& p, const AttentionPlan& plan,
                             AttentionDeviceWorkspace& ws, cudaStream_t stream) {
  if (plan.num_seqs != p.num_seqs)
    return fail("cuda paged_attention: the plan is for another batch");
  if (p.kv.head_dim > kMaxHeadDim)
    return fail("cuda paged_attention: head_dim above " + std::to_string(kMaxHeadDim));
  const std::size_t merge_items = plan.merges.empty() ? 0 : plan.items.size();
  const std::size_t partial = merge_items * std::size_t(p.n_heads) * std::size_t(p.kv.head_dim + 2);
  if (auto ok = ws.reserve(plan.items.size(), plan.merges.size(), partial); !ok) return ok;
  if (plan.items.empty()) return {};
  if (auto ok = check_cuda(cudaMemcpyAsync(ws.items(), plan.items.data(),
                                           plan.items.size() * sizeof(AttentionWorkItem),
                                           cudaMemcpyHostToDevice, stream),
                           "cuda paged_attention: upload items");
      !ok) {
    return ok;
  }
  if (!plan.merges.empty()) {
    if (auto ok = check_cuda(cudaMemcpyAsync(ws.merges(), plan.merges.data(),
                                             plan.merges.size() * sizeof(AttentionMerge),
                                             cudaMemcpyHostToDevice, stream),
                             "cuda paged_attention: upload merges");
        !ok) {
      return ok;
    }
  }
  const auto n_items = static_cast<std::int32_t>(plan.items.size());
  if (auto ok =
          check_cuda(launch_paged_attention_items(p, ws.items(), n_items, ws.partial(), stream),
                     "cuda paged_attention: item kernel");
      !ok) {
    return ok;
  }
  const auto n_merges = static_cast<std::int32_t>(plan.merges.size());
  return check_cuda(launch_paged_attention_merge(p, ws.merges(), n_merges, ws.partial(), stream),
                    "cuda paged_attention: merge kernel");
}

Result<void> reshape_and_cache(const ReshapeAndCacheParams& p, cudaStream_t stream) {
  return check_cuda(launch_reshape_and_cache(p, stream), "cuda reshape_and_cache");
}

}  // namespace pensieve::kernels::cuda
