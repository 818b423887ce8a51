#pragma once
// TenantTurnLimiter: how many turns one tenant (one API key) may have in the
// engine at once, across every front end (--max-turns-per-tenant), so that
// one client's loop cannot fill the queue the others wait in. A turn over its
// tenant's limit is refused at once with TurnErrorKind::rate_limited (HTTP
// 429 with Retry-After, WebSocket close 1013, RPC OVERLOADED), before it
// reaches the engine.
//
// Thread-safe: one limiter is shared by the front ends on every thread, and
// a permit may be released on any of them.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace pensieve::net {

class TenantTurnLimiter {
 public:
  // max_turns <= 0: no limit.
  explicit TenantTurnLimiter(std::int32_t max_turns);

  // One turn's slot, held until the permit is destroyed; null when the
  // tenant has max_turns turns already.
  std::shared_ptr<const void> try_acquire(const std::string& tenant);

  std::int32_t running(const std::string& tenant) const;
  std::int32_t max_turns() const { return core_->max_turns; }

 private:
  struct Core {
    mutable std::mutex mutex;
    std::unordered_map<std::string, std::int32_t> running;  // tenants with a turn only
    std::int32_t max_turns = 0;
  };
  std::shared_ptr<Core> core_;  // shared with the permits, which may outlive the limiter
};

}  // namespace pensieve::net
