#pragma once
// Collectives over NCCL, one communicator per rank, each rank on its own GPU
// and CUDA stream. Calls enqueue on the rank's stream and return at once: the
// buffers are device memory, and later work on that stream sees the result
// (other streams wait on an event, never a host synchronisation).
//
// Every NCCL and CUDA return code is checked and comes back as an Error that
// names the call and NCCL's message (ncclGetErrorString / ncclGetLastError).
//
// One GPU, several ranks: NCCL 2.5 and later refuses two ranks of one
// communicator on the same device ("Duplicate GPU detected",
// ncclInvalidUsage), because its topology search assumes one rank per GPU.
// create_group() therefore rejects repeated devices with that explanation.
// On a one-GPU machine `--tp 2` is tested with the same sharded forward pass
// over HostCollective (gpu/model/host_collective.hpp) on the CPU backend;
// NcclCollective with one rank (a no-op all-reduce, a copy for all-gather)
// still runs the real NCCL path there.
//
// Summation order: NCCL's ring / tree order is fixed for a fixed topology and
// rank count, so results are reproducible run to run and identical on every
// rank (each element is reduced by one rank, then broadcast).
//
// Thread: each rank's calls come from its own thread (the one that drives
// its device); one thread calling several ranks' collectives would need
// ncclGroupStart/End around them, which this class does not do. create_group() makes every communicator from the
// calling thread (ncclCommInitAll); create() makes one rank's, called by
// every rank with the same id (from its own thread or process).
#include "gpu/model/collective.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <span>
#include <vector>

namespace pensieve::backend::cuda {

class NcclCollective final : public model::Collective {
 public:
  ~NcclCollective() override;
  NcclCollective(const NcclCollective&) = delete;
  NcclCollective& operator=(const NcclCollective&) = delete;

  // A fresh id for create(); made once (by rank 0) and shared with every rank.
  static Result<ncclUniqueId> unique_id();
  // Rank `rank` of `ranks`, on `device`, enqueueing on `stream`.
  static Result<std::unique_ptr<NcclCollective>> create(const ncclUniqueId& id, std::int32_t rank,
                                                        std::int32_t ranks, int device,
                                                        cudaStream_t stream);
  // Every rank of a group in this process: rank r on devices[r] and streams[r]
  // (distinct devices, see above).
  static Result<std::vector<std::unique_ptr<NcclCollective>>> create_group(
      std::span<const int> devices, std::span<const cudaStream_t> streams);

  std::int32_t rank() const override { return rank_; }
  std::int32_t ranks() const override { return ranks_; }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  Result<void> all_reduce_sum(float* data, std::size_t count) override;
  Result<void> all_gather(const float* send, float* recv, std::size_t count) override;

 private:
  NcclCollective(ncclComm_t comm, std::int32_t rank, std::int32_t ranks, int device, cudaStream_t stream)
      : comm_(comm), rank_(rank), ranks_(ranks), device_(device), stream_(stream) {}
  ncclComm_t comm_;
  std::int32_t rank_, ranks_;
  int device_;
  cudaStream_t stream_;
};

}  // namespace pensieve::backend::cuda
