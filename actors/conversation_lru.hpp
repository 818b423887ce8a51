#pragma once
// ConversationLru: which stored conversations are in memory, least recently
// used first, and which of them must leave it (--max-conversations,
// --conversation-idle-s). Plain logic with a clock the caller passes, so
// tests drive it with a manual one; the Engine owns it under its store's
// mutex and does the leaving (its KV freed, its actor stopped, its history
// unloaded to the journal or deleted).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

namespace pensieve::actors {

struct ConversationLimits {
  std::int64_t max_loaded = 0;  // conversations in memory at once; 0: no limit
  std::int64_t idle_ns = 0;     // idle time after which one leaves; 0: never
};

class ConversationLru {
 public:
  // `key` was used now: it becomes the most recent (inserted if new).
  void touch(const std::string& key, std::int64_t now_ns);
  void erase(const std::string& key);
  std::size_t size() const { return order_.size(); }
  bool contains(const std::string& key) const { return where_.contains(key); }

  // The keys that must leave memory now, least recently used first: while
  // more than max_loaded are in memory, the least recent; and (with idle_ns)
  // every one idle that long. A busy one (a turn queued or running) never
  // leaves, and its idle time restarts (the turn is activity); `keep` (the
  // one being used) never leaves. The caller erases what it unloads.
  std::vector<std::string> pick(std::int64_t now_ns, const ConversationLimits& limits,
                                const std::function<bool(const std::string&)>& busy,
                                const std::string* keep = nullptr);

 private:
  struct Item {
    std::string key;
    std::int64_t last_used_ns = 0;
  };
  std::list<Item> order_;  // least recently used first
  std::unordered_map<std::string, std::list<Item>::iterator> where_;
};

// The most recent `capacity` conversations deleted by the limits, so that a
// later request for one is told it expired (a 404) instead of silently
// starting an empty conversation under its id. Bounded: the oldest is
// forgotten first (then its id is simply unknown, or free to reuse).
class ExpiredIds {
 public:
  explicit ExpiredIds(std::size_t capacity) : capacity_(capacity) {}
  void remember(const std::string& key);
  void forget(const std::string& key);
  bool contains(const std::string& key) const { return where_.contains(key); }
  std::size_t size() const { return order_.size(); }

 private:
  std::size_t capacity_;
  std::list<std::string> order_;  // oldest first
  std::unordered_map<std::string, std::list<std::string>::iterator> where_;
};

}  // namespace pensieve::actors
