#include "actors/disk_chunk_paths.hpp"

#include "actors/prefix_chain.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <tuple>

namespace pensieve::actors {

namespace {

bool fits_label(const DiskChunk& c, std::size_t block_tokens) {
  const kv::ChunkLabel& l = c.label;
  if (l.ns.empty() || c.tokens.empty() || c.tokens.size() > block_tokens) return false;
  if (l.block_index == 0 && l.parent_chain != chain_seed(l.ns)) return false;
  if (c.tokens.size() < block_tokens) return l.chain == 0;
  return l.chain == chain_step(l.parent_chain, c.tokens);
}

}  // namespace

namespace {

// Where the histories key their full blocks: (namespace, chain key of
// blocks [0, b]) -> (history, b + 1).
using KnownKeys = std::map<std::pair<std::string, std::uint64_t>, std::pair<std::size_t, std::uint32_t>>;

KnownKeys known_keys(const std::vector<KnownHistory>& histories, std::size_t block_tokens) {
  KnownKeys known;
  for (std::size_t h = 0; h < histories.size(); ++h) {
    const KnownHistory& k = histories[h];
    const std::span<const std::int32_t> tokens(k.tokens);
    std::uint64_t key = chain_seed(k.ns);
    for (std::size_t b = 0; (b + 1) * block_tokens <= tokens.size(); ++b) {
      key = chain_step(key, tokens.subspan(b * block_tokens, block_tokens));
      known.try_emplace({k.ns, key}, h, std::uint32_t(b + 1));
    }
  }
  return known;
}

}  // namespace

RestoredKv restore_paths(std::vector<DiskChunk> chunks, std::int32_t block_tokens,
                         const std::vector<KnownHistory>& histories) {
  RestoredKv out;
  const KnownKeys known = known_keys(histories, std::size_t(block_tokens));
  std::sort(chunks.begin(), chunks.end(), [](const DiskChunk& a, const DiskChunk& b) {
    return std::tie(a.label.block_index, a.slot.value) < std::tie(b.label.block_index, b.slot.value);
  });
  const std::size_t n = chunks.size();
  // Full blocks by (namespace, chain key); partial ones by their parent and tokens.
  std::map<std::pair<std::string, std::uint64_t>, std::size_t> full;
  std::map<std::tuple<std::string, std::uint64_t, std::vector<std::int32_t>>, std::size_t> partial;
  std::vector<std::size_t> parent(n, SIZE_MAX);
  // An orphan's missing front, from a history: (history, chunks missing).
  std::vector<std::optional<std::pair<std::size_t, std::uint32_t>>> front(n);
  std::vector<bool> placed(n, false), has_child(n, false);
  // In block order, so a chunk's parent is decided before it.
  for (std::size_t i = 0; i < n; ++i) {
    const DiskChunk& c = chunks[i];
    if (!fits_label(c, std::size_t(block_tokens))) continue;
    if (c.label.block_index > 0) {
      auto p = full.find({c.label.ns, c.label.parent_chain});
      if (p != full.end() && chunks[p->second].label.block_index + 1 == c.label.block_index) {
        parent[i] = p->second;
      } else if (auto k = known.find({c.label.ns, c.label.parent_chain});
                 k != known.end() && k->second.second == c.label.block_index) {
        front[i] = k->second;
      } else {
        continue;  // an orphan no history explains
      }
    }
    const bool fresh = c.label.chain != 0
                           ? full.try_emplace({c.label.ns, c.label.chain}, i).second
                           : partial.try_emplace({c.label.ns, c.label.parent_chain, c.tokens}, i).second;
    if (!fresh) continue;  // a duplicate: the lower slot is kept
    placed[i] = true;
    if (parent[i] != SIZE_MAX) has_child[parent[i]] = true;
  }
  std::vector<std::size_t> leaves;
  for (std::size_t i = 0; i < n; ++i) {
    (placed[i] ? out.used : out.unused).push_back(chunks[i].slot);
    if (placed[i] && !has_child[i]) leaves.push_back(i);
  }
  std::sort(leaves.begin(), leaves.end(),
            [&](std::size_t a, std::size_t b) { return chunks[a].slot.value < chunks[b].slot.value; });
  for (std::size_t leaf : leaves) {
    std::vector<std::size_t> walk;
    for (std::size_t i = leaf; i != SIZE_MAX; i = parent[i]) walk.push_back(i);
    RestoredPath path;
    path.ns = chunks[leaf].label.ns;
    if (const auto& f = front[walk.back()]) {
      const std::vector<std::int32_t>& known_tokens = histories[f->first].tokens;
      path.missing_front = f->second;
      path.tokens.assign(known_tokens.begin(),
                         known_tokens.begin() + std::ptrdiff_t(std::size_t(f->second) * std::size_t(block_tokens)));
    }
    for (auto it = walk.rbegin(); it != walk.rend(); ++it) {
      const DiskChunk& c = chunks[*it];
      path.tokens.insert(path.tokens.end(), c.tokens.begin(), c.tokens.end());
      path.slots.push_back(c.slot);
      path.chunk_tokens.push_back(c.tokens);
    }
    out.paths.push_back(std::move(path));
  }
  const auto by_slot = [](kv::DiskSlot a, kv::DiskSlot b) { return a.value < b.value; };
  std::sort(out.used.begin(), out.used.end(), by_slot);
  std::sort(out.unused.begin(), out.unused.end(), by_slot);
  return out;
}

std::vector<DiskChunk> disk_chunks_of(const std::vector<kv::ScannedChunk>& scanned) {
  std::vector<DiskChunk> out;
  out.reserve(scanned.size());
  for (const kv::ScannedChunk& s : scanned) out.push_back({kv::DiskSlot{s.header.slot}, s.label, s.tokens});
  return out;
}

}  // namespace pensieve::actors
