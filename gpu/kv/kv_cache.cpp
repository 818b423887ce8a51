#include "gpu/kv/kv_cache.hpp"

namespace pensieve::kv {

KvCache::KvCache(const KvPoolConfig& config) : pool_(config), allocator_(config.num_blocks) {
  if (config.poison_freed) allocator_.set_free_hook([this](BlockId id) { pool_.poison(id); });
}

std::optional<std::vector<std::int64_t>> KvCache::append(BlockTable& table, std::int64_t n) {
  const std::int64_t first = table.num_tokens();
  const auto appended = table.append(n, allocator_);
  if (!appended) return std::nullopt;
  if (appended->copy)
    pool_.copy_prefix(appended->copy->src, appended->copy->dst, appended->copy->tokens);
  std::vector<std::int64_t> slots;
  slots.reserve(static_cast<std::size_t>(n));
  for (std::int64_t pos = first; pos < first + n; ++pos) slots.push_back(table.slot(pos));
  return slots;
}

KvMemoryReport KvCache::report(std::span<const BlockTable* const> tables) const {
  return kv_memory_report(allocator_, tables, pool_.config().block_tokens, pool_.bytes_per_token());
}

}  // namespace pensieve::kv
