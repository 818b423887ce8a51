#include "gpu/text/stop_matcher.hpp"

#include <algorithm>
#include <cassert>
#include <utility>

namespace pensieve::model {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) {
  for (std::string& s : stop_strings)
    if (!s.empty()) stop_strings_.push_back(std::move(s));
}

StopStep StopMatcher::push(std::string_view text) {
  assert(!stopped_ && "no text after a stop string");
  held_.append(text);
  StopStep step;
  // The earliest completed stop string wins; on a tie, the first listed.
  std::size_t best_pos = std::string::npos;
  for (std::size_t i = 0; i < stop_strings_.size(); ++i) {
    const std::size_t pos = held_.find(stop_strings_[i]);
    if (pos < best_pos) {
      best_pos = pos;
      step.stop_index = i;
    }
  }
  if (best_pos != std::string::npos) {
    step.released = held_.substr(0, best_pos);
    step.stopped = stopped_ = true;
    held_.clear();
    return step;
  }
  const std::size_t keep = partial_match_bytes();
  step.released = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return step;
}

std::string StopMatcher::flush() {
  return std::exchange(held_, std::string{});
}

std::size_t StopMatcher::partial_match_bytes() const {
  std::size_t longest = 0;
  const std::string_view held = held_;
  for (const std::string& s : stop_strings_) {
    const std::size_t max_len = std::min(held.size(), s.size() - 1);
    for (std::size_t len = max_len; len > longest; --len) {
      if (held.substr(held.size() - len) == std::string_view(s).substr(0, len)) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

}  // namespace pensieve::model
