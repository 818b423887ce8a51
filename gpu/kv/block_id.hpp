#pragma once
// The id of one physical block of a tier's KV pool. Strong so that a block id
// is never mixed up with a logical block index or a token count.
#include <compare>
#include <cstdint>

namespace pensieve::kv {

struct BlockId {
  std::uint32_t value = 0;
  friend constexpr auto operator<=>(BlockId, BlockId) = default;
};

}  // namespace pensieve::kv
