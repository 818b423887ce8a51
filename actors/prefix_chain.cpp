#include "actors/prefix_chain.hpp"

namespace pensieve::actors {

namespace {

// splitmix64's finalizer: every input bit reaches every output bit.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::uint64_t chain_seed(std::string_view ns) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : ns) h = (h ^ std::uint8_t(c)) * 0x100000001b3ull;
  return mix(h);
}

std::uint64_t chain_step(std::uint64_t parent, std::span<const std::int32_t> block) {
  std::uint64_t h = parent;
  for (std::int32_t t : block) h = mix(h ^ std::uint32_t(t));
  return h;
}

}  // namespace pensieve::actors
