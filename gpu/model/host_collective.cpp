#include "gpu/model/host_collective.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace pensieve::model {

HostCollectiveGroup::HostCollectiveGroup(std::int32_t ranks)
    : barrier_(std::max<std::ptrdiff_t>(ranks, 1)),
      published_(std::size_t(std::max(ranks, 1)), nullptr),
      counts_(std::size_t(std::max(ranks, 1)), 0) {
  assert(ranks >= 1 && "a group has at least one rank");
  for (std::int32_t r = 0; r < std::max(ranks, 1); ++r) {
    members_.push_back(std::unique_ptr<HostCollective>(new HostCollective(*this, r)));
  }
}

std::int32_t HostCollective::ranks() const { return group_->ranks(); }

namespace {

// Rank r's share [begin, end) of count elements.
std::pair<std::size_t, std::size_t> share(std::size_t count, std::int32_t r, std::int32_t n) {
  const std::size_t per = (count + std::size_t(n) - 1) / std::size_t(n);
  const std::size_t begin = std::min(count, per * std::size_t(r));
  return {begin, std::min(count, begin + per)};
}

}  // namespace

// Three phases, each ended by the barrier: publish the buffers; each rank
// sums its share of the elements into the result (rank order per element);
// each rank copies the result back. The last barrier keeps a fast rank from
// starting the next call while a slow one still reads the result.
Result<void> HostCollective::all_reduce_sum(float* data, std::size_t count) {
  HostCollectiveGroup& g = *group_;
  const std::int32_t n = g.ranks();
  g.published_[std::size_t(rank_)] = data;
  g.counts_[std::size_t(rank_)] = count;
  if (rank_ == 0) g.result_.resize(count);
  g.barrier_.arrive_and_wait();
  for (std::int32_t r = 0; r < n; ++r) {
    assert(g.counts_[std::size_t(r)] == count && "every rank reduces the same count");
  }
  const auto [begin, end] = share(count, rank_, n);
  float* out = g.result_.data();
  for (std::size_t i = begin; i < end; ++i) out[i] = g.published_[0][i];
  for (std::int32_t r = 1; r < n; ++r) {
    const float* in = g.published_[std::size_t(r)];
    for (std::size_t i = begin; i < end; ++i) out[i] += in[i];
  }
  g.barrier_.arrive_and_wait();
  if (count > 0) std::memcpy(data, out, count * sizeof(float));
  g.barrier_.arrive_and_wait();
  return {};
}

Result<void> HostCollective::all_gather(const float* send, float* recv, std::size_t count) {
  HostCollectiveGroup& g = *group_;
  const std::int32_t n = g.ranks();
  g.published_[std::size_t(rank_)] = send;
  g.counts_[std::size_t(rank_)] = count;
  g.barrier_.arrive_and_wait();
  for (std::int32_t r = 0; r < n; ++r) {
    assert(g.counts_[std::size_t(r)] == count && "every rank gathers the same count");
    if (count > 0) {
      std::memcpy(recv + std::size_t(r) * count, g.published_[std::size_t(r)], count * sizeof(float));
    }
  }
  g.barrier_.arrive_and_wait();
  return {};
}

}  // namespace pensieve::model
