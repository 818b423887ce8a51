#pragma once
// The collectives a tensor-parallel forward pass needs, one object per rank.
// Buffers live where the backend computes: host memory for the CPU backend
// (HostCollective), device memory for CUDA (NcclCollective, which enqueues
// on its stream and returns before the device has run it).
//
// Every rank of a group must make the same calls in the same order with the
// same counts (as in MPI and NCCL); a rank that skips one leaves the others
// waiting. The forward pass guarantees this because every rank validates the
// same batch the same way before its first collective.
//
// All ranks receive bit-identical results, so the replicated activations
// (the residual stream) never drift apart between ranks.
#include "runtime/error.hpp"

#include <cstddef>
#include <cstdint>

namespace pensieve::model {

class Collective {
 public:
  virtual ~Collective() = default;

  virtual std::int32_t rank() const = 0;
  virtual std::int32_t ranks() const = 0;

  // data[i] = the sum over ranks of each rank's data[i], in place.
  virtual Result<void> all_reduce_sum(float* data, std::size_t count) = 0;
  // recv = every rank's `count` floats of send, concatenated in rank order
  // (recv holds ranks() * count floats; send may not alias recv).
  virtual Result<void> all_gather(const float* send, float* recv, std::size_t count) = 0;
};

}  // namespace pensieve::model
