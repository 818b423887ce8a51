#pragma once
// The keys of the prefix index's hash chain (KvCacheIndex): a namespace's
// seed, then one step per full KV block over its token ids. Stable across
// runs and builds (FNV-1a and splitmix64, never std::hash): chunks on the
// disk tier carry these keys, and a later run's index must find them
// under the same ones (actors/disk_chunk_paths.hpp). Pure.
#include <cstdint>
#include <span>
#include <string_view>

namespace pensieve::actors {

std::uint64_t chain_seed(std::string_view ns);
// The key of a prefix one block longer than the one keyed `parent`.
std::uint64_t chain_step(std::uint64_t parent, std::span<const std::int32_t> block);

}  // namespace pensieve::actors
