#include "actors/conversation_lru.hpp"

namespace pensieve::actors {

void ConversationLru::touch(const std::string& key, std::int64_t now_ns) {
  auto found = where_.find(key);
  if (found == where_.end()) {
    order_.push_back(Item{key, now_ns});
    where_.emplace(key, std::prev(order_.end()));
    return;
  }
  found->second->last_used_ns = now_ns;
  order_.splice(order_.end(), order_, found->second);
}

void ConversationLru::erase(const std::string& key) {
  auto found = where_.find(key);
  if (found == where_.end()) return;
  order_.erase(found->second);
  where_.erase(found);
}

std::vector<std::string> ConversationLru::pick(std::int64_t now_ns, const ConversationLimits& limits,
                                               const std::function<bool(const std::string&)>& busy,
                                               const std::string* keep) {
  std::vector<std::string> out;
  std::int64_t loaded = std::int64_t(order_.size());
  for (Item& item : order_) {
    const bool over = limits.max_loaded > 0 && loaded > limits.max_loaded;
    // Without an idle limit nothing past the first that may stay must go.
    if (!over && limits.idle_ns <= 0) break;
    if (keep != nullptr && item.key == *keep) continue;
    if (busy(item.key)) {
      item.last_used_ns = now_ns;
      continue;
    }
    const bool idle = limits.idle_ns > 0 && now_ns - item.last_used_ns >= limits.idle_ns;
    if (over || idle) {
      out.push_back(item.key);
      --loaded;
    }
  }
  return out;
}

void ExpiredIds::remember(const std::string& key) {
  if (capacity_ == 0 || where_.contains(key)) return;
  if (order_.size() == capacity_) {
    where_.erase(order_.front());
    order_.pop_front();
  }
  order_.push_back(key);
  where_.emplace(key, std::prev(order_.end()));
}

void ExpiredIds::forget(const std::string& key) {
  auto found = where_.find(key);
  if (found == where_.end()) return;
  order_.erase(found->second);
  where_.erase(found);
}

}  // namespace pensieve::actors
