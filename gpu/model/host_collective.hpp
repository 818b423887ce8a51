#pragma once
// Collectives over host memory for N ranks running on N threads of one
// process: the CPU backend's stand-in for NCCL, so tensor parallelism is
// tested without a GPU.
//
// A HostCollectiveGroup owns the shared state (a barrier, each rank's
// published buffer, a result buffer); each rank's thread uses its own
// HostCollective from group.rank(r). A reduction adds the ranks' values in
// rank order 0, 1, ..., N-1 for every element whatever thread computes it,
// so results are reproducible run to run and identical on every rank.
// Each call blocks its thread until every rank has made the same call.
#include "gpu/model/collective.hpp"

#include <barrier>
#include <memory>
#include <vector>

namespace pensieve::model {

class HostCollectiveGroup;

class HostCollective final : public Collective {
 public:
  std::int32_t rank() const override { return rank_; }
  std::int32_t ranks() const override;
  Result<void> all_reduce_sum(float* data, std::size_t count) override;
  Result<void> all_gather(const float* send, float* recv, std::size_t count) override;

 private:
  friend class HostCollectiveGroup;
  HostCollective(HostCollectiveGroup& group, std::int32_t rank) : group_(&group), rank_(rank) {}
  HostCollectiveGroup* group_;
  std::int32_t rank_;
};

class HostCollectiveGroup {
 public:
  explicit HostCollectiveGroup(std::int32_t ranks);
  HostCollectiveGroup(const HostCollectiveGroup&) = delete;
  HostCollectiveGroup& operator=(const HostCollectiveGroup&) = delete;

  std::int32_t ranks() const { return std::int32_t(members_.size()); }
  // Rank r's endpoint; lives as long as the group.
  HostCollective& rank(std::int32_t r) { return *members_[std::size_t(r)]; }

 private:
  friend class HostCollective;
  std::vector<std::unique_ptr<HostCollective>> members_;
  std::barrier<> barrier_;
  std::vector<const float*> published_;  // each rank's buffer during a call
  std::vector<std::size_t> counts_;      // each rank's count, checked equal
  std::vector<float> result_;
};

}  // namespace pensieve::model
