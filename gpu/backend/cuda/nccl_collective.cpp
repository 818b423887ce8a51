#include "gpu/backend/cuda/nccl_collective.hpp"

#include <cassert>
#include <cstdio>
#include <string>

namespace pensieve::backend::cuda {

namespace {

Result<void> check_nccl(ncclResult_t r, const char* call, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return {};
  std::string message = std::string(call) + " failed: " + ncclGetErrorString(r);
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0') {
    message += " (" + std::string(last) + ")";
  }
  return fail(message);
}

Result<void> check_cuda(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return {};
  return fail(std::string(call) + " failed: " + cudaGetErrorString(e));
}

}  // namespace

NcclCollective::~NcclCollective() {
  // Destroy waits for this rank's outstanding operations; an error here
  // cannot be returned, and leaking the communicator is the safe outcome.
  if (const ncclResult_t r = ncclCommDestroy(comm_); r != ncclSuccess) {
    std::fprintf(stderr, "pensieve: ncclCommDestroy (rank %d) failed: %s\n", int(rank_),
                 ncclGetErrorString(r));
  }
}

Result<ncclUniqueId> NcclCollective::unique_id() {
  ncclUniqueId id{};
  if (auto ok = check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId"); !ok) return ok.error();
  return id;
}

Result<std::unique_ptr<NcclCollective>> NcclCollective::create(const ncclUniqueId& id, std::int32_t rank,
                                                               std::int32_t ranks, int device,
                                                               cudaStream_t stream) {
  if (ranks < 1 || rank < 0 || rank >= ranks) {
    return fail("NCCL rank " + std::to_string(rank) + " of " + std::to_string(ranks) + " is out of range");
  }
  if (auto ok = check_cuda(cudaSetDevice(device), "cudaSetDevice"); !ok) return ok.error();
  ncclComm_t comm = nullptr;
  if (auto ok = check_nccl(ncclCommInitRank(&comm, ranks, id, rank), "ncclCommInitRank"); !ok) {
    return ok.error();
  }
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
  if (auto ok = check_nccl(ncclCommInitAll(comms.data(), n, devices.data()), "ncclCommInitAll"); !ok) {
    return ok.error();
  }
  std::vector<std::unique_ptr<NcclCollective>> group;
  for (int r = 0; r < n; ++r) {
    group.push_back(std::unique_ptr<NcclCollective>(
        new NcclCollective(comms[std::size_t(r)], r, n, devices[std::size_t(r)], streams[std::size_t(r)])));
  }
  return group;
}

Result<void> NcclCollective::all_reduce_sum(float* data, std::size_t count) {
  return check_nccl(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_),
                    "ncclAllReduce", comm_);
}

Result<void> NcclCollective::all_gather(const float* send, float* recv, std::size_t count) {
  return check_nccl(ncclAllGather(send, recv, count, ncclFloat32, comm_, stream_), "ncclAllGather", comm_);
}

}  // namespace pensieve::backend::cuda
