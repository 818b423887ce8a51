#pragma once
// The decisions of a tensor-parallel pass on a device backend (CUDA over
// NCCL), in plain C++ so the CPU tests exercise them with HostCollective:
//
// - the residual: row-parallel O and down products land on the residual
//   stream x. Rank 0 adds its partial product to x (beta 1); every other
//   rank writes its partial product over x (beta 0); the in-place all-reduce
//   then leaves x + sum of the partials on every rank, bit-identical, with
//   no buffer beyond x;
// - the logits: each rank computes a [rows][vocab_slice] block of its
//   vocabulary rows; the all-gather returns [rank][rows][vocab_slice]; one
//   2-D copy per rank (tp_logit_copies) lays them out as [rows][vocab],
//   dropping the last rank's padding;
// - devices: rank r runs on device r, one rank per device (NCCL refuses two
//   ranks of a communicator on one device).
#include "gpu/model/tp_rank.hpp"
#include "runtime/error.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pensieve::model {

// The beta of a row-parallel product into the residual (see above).
inline float tp_residual_beta(TpRank tp) { return tp.rank == 0 ? 1.0f : 0.0f; }

// One strided copy of floats (offsets and pitches in floats): `rows` rows of
// `width` floats from src + src_offset (rows src_pitch apart) to dst +
// dst_offset (rows dst_pitch apart); cudaMemcpy2DAsync's shape.
struct TpLogitCopy {
  std::size_t src_offset = 0, src_pitch = 0;
  std::size_t dst_offset = 0, dst_pitch = 0;
  std::size_t width = 0, rows = 0;
};

// The copies from the gathered [ranks][rows][vocab_slice] logits to
// [rows][vocab]; ranks whose slice is empty get none.
std::vector<TpLogitCopy> tp_logit_copies(std::int32_t ranks, std::int32_t vocab, std::int32_t rows);

// Applies copies on the host (the CPU reference of the device's 2-D copies).
void apply_logit_copies(const std::vector<TpLogitCopy>& copies, const float* src, float* dst);

// Devices for `ranks` ranks on a machine with `devices` devices: rank r on
// device r. Errors: fewer devices than ranks, ranks < 1.
Result<std::vector<int>> tp_devices(std::int32_t ranks, int devices);

}  // namespace pensieve::model
