#include "gpu/backend/cuda/nccl_collective.hpp"

#include "gpu/backend/cuda/cuda_check.hpp"

#include <cstdio>
#include <string>

namespace pensieve::backend::cuda {

NcclCollective::~NcclCollective() {
  // Destroy waits for this rank's outstanding operations; an error here
  // cannot be returned, and leaking the communicator is the safe outcome.
  if (const ncclResult_t r = ncclCommDestroy(comm_); r != ncclSuccess) {
    std::fprintf(stderr, "pensieve: rank %d: %s\n", int(rank_), nccl_error_message("ncclCommDestroy", r).c_str());
  }
}

Result<ncclUniqueId> NcclCollective::unique_id() {
  ncclUniqueId id{};
  PENSIEVE_NCCL_TRY(ncclGetUniqueId(&id));
  return id;
}

Result<std::unique_ptr<NcclCollective>> NcclCollective::create(const ncclUniqueId& id, std::int32_t rank,
                                                               std::int32_t ranks, int device,
                                                               cudaStream_t stream) {
  if (ranks < 1 || rank < 0 || rank >= ranks) {
    return fail("NCCL rank " + std::to_string(rank) + " of " + std::to_string(ranks) + " is out of range");
  }
  PENSIEVE_CUDA_TRY(cudaSetDevice(device));
  ncclComm_t comm = nullptr;
  PENSIEVE_NCCL_TRY(ncclCommInitRank(&comm, ranks, id, rank));
  return std::unique_ptr<NcclCollective>(new NcclCollective(comm, rank, ranks, device, stream));
}

Result<std::vector<std::unique_ptr<NcclCollective>>> NcclCollective::create_group(
    std::span<const int> devices, std::span<const cudaStream_t> streams) {
  if (devices.empty() || devices.size() != streams.size()) {
    return fail("an NCCL group needs one stream per device and at least one device");
  }
  for (std::size_t i = 0; i < devices.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (devices[i] == devices[j]) {
        return fail("NCCL ranks " + std::to_string(j) + " and " + std::to_string(i) +
                    " are both on CUDA device " + std::to_string(devices[i]) +
                    ": NCCL allows one rank per GPU (use the CPU backend's host collective "
                    "to test tensor parallelism on one GPU)");
      }
    }
  }
  const int n = int(devices.size());
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  PENSIEVE_NCCL_TRY(ncclCommInitAll(comms.data(), n, devices.data()));
  std::vector<std::unique_ptr<NcclCollective>> group;
  for (int r = 0; r < n; ++r) {
    group.push_back(std::unique_ptr<NcclCollective>(
        new NcclCollective(comms[std::size_t(r)], r, n, devices[std::size_t(r)], streams[std::size_t(r)])));
  }
  return group;
}

Result<void> NcclCollective::all_reduce_sum(float* data, std::size_t count) {
  PENSIEVE_NCCL_TRY(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_));
  return {};
}

Result<void> NcclCollective::all_gather(const float* send, float* recv, std::size_t count) {
  PENSIEVE_NCCL_TRY(ncclAllGather(send, recv, count, ncclFloat32, comm_, stream_));
  return {};
}

}  // namespace pensieve::backend::cuda
