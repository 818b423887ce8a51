#include "net/tenant_limits.hpp"

namespace pensieve::net {

TenantTurnLimiter::TenantTurnLimiter(std::int32_t max_turns) : core_(std::make_shared<Core>()) {
  core_->max_turns = max_turns;
}

std::shared_ptr<const void> TenantTurnLimiter::try_acquire(const std::string& tenant) {
  std::lock_guard lock(core_->mutex);
  std::int32_t& n = core_->running[tenant];
  if (core_->max_turns > 0 && n >= core_->max_turns) {
    if (n == 0) core_->running.erase(tenant);
    return nullptr;
  }
  ++n;
  // The permit's deleter gives the slot back; it owns no object of its own.
  return std::shared_ptr<const void>(static_cast<const void*>(core_.get()),
                                     [core = core_, tenant](const void*) {
                                       std::lock_guard lock(core->mutex);
                                       auto it = core->running.find(tenant);
                                       if (it != core->running.end() && --it->second == 0) {
                                         core->running.erase(it);
                                       }
                                     });
}

std::int32_t TenantTurnLimiter::running(const std::string& tenant) const {
  std::lock_guard lock(core_->mutex);
  auto it = core_->running.find(tenant);
  return it == core_->running.end() ? 0 : it->second;
}

}  // namespace pensieve::net
