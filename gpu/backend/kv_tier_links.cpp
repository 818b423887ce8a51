#include "gpu/backend/kv_tier_links.hpp"

namespace pensieve::backend {

kv::KvPoolConfig host_tier_config(const kv::KvPoolConfig& device, std::int32_t slots) {
  kv::KvPoolConfig c = device;
  c.num_blocks = slots;
  c.tier = kv::Tier::host;
  c.poison_freed = false;  // the host tier never runs kernels over its slots
  return c;
}

}  // namespace pensieve::backend
