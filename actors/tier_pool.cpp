#include "actors/tier_pool.hpp"

#include <algorithm>

namespace pensieve::actors {

namespace {

template <class Slot>
kv::BlockId as_block(Slot s) {
  return kv::BlockId{s.value};
}

}  // namespace

template <class Slot>
TierPool<Slot>::TierPool(std::int32_t slots) : allocator_(std::max(0, slots)) {}

template <class Slot>
std::optional<Slot> TierPool<Slot>::allocate() {
  if (auto b = allocator_.allocate()) return Slot{b->value};
  return std::nullopt;
}

template <class Slot>
void TierPool<Slot>::retain(Slot slot) {
  allocator_.retain(as_block(slot));
}

template <class Slot>
bool TierPool<Slot>::release(Slot slot) {
  return allocator_.release(as_block(slot));
}

template <class Slot>
void TierPool<Slot>::release(Slot slot, std::vector<Slot>& freed) {
  if (release(slot)) freed.push_back(slot);
}

template <class Slot>
std::int32_t TierPool<Slot>::ref_count(Slot slot) const {
  return allocator_.ref_count(as_block(slot));
}

template <class Slot>
void TierPool<Slot>::claim(const std::vector<Slot>& slots) {
  std::vector<bool> wanted(std::size_t(allocator_.num_blocks()), false);
  for (Slot s : slots) wanted.at(s.value) = true;
  std::vector<kv::BlockId> others;
  while (auto b = allocator_.allocate()) {
    if (!wanted[b->value]) others.push_back(*b);
  }
  for (kv::BlockId b : others) allocator_.release(b);  // back in their order
}

template <class Slot>
std::vector<Slot> TierPool<Slot>::free_list() const {
  std::vector<Slot> out;
  for (kv::BlockId b : allocator_.free_list()) out.push_back(Slot{b.value});
  return out;
}

template class TierPool<kv::BlockId>;
template class TierPool<HostSlot>;
template class TierPool<DiskSlot>;

}  // namespace pensieve::actors
