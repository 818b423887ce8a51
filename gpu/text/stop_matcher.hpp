#pragma once
// Finding stop strings in streamed text without ever releasing their start.
//
// A StopMatcher belongs to one request and is fed, in order, the pieces of
// text the detokenizer produces for it (whole UTF-8 characters). It holds
// back the longest tail that could still grow into a stop string, so a client
// never sees the beginning of a stop string that later completes; the text
// before a completed stop string is released and the stop string is not.
// Single-threaded: used by whoever streams that request.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pensieve::model {

struct StopStep {
  std::string released;           // text safe to send now
  bool stopped = false;           // a stop string completed; the request ends
  std::size_t stop_index = 0;     // which stop string, when stopped
};

class StopMatcher {
 public:
  // Empty strings in `stop_strings` are ignored.
  explicit StopMatcher(std::vector<std::string> stop_strings);

  // Appends the next piece of decoded text. After a stop, must not be called.
  StopStep push(std::string_view text);

  // The request ended without a stop string: releases what was held back.
  std::string flush();

  bool stopped() const { return stopped_; }
  std::size_t held_bytes() const { return held_.size(); }

 private:
  // Bytes at the end of held_ that are a proper prefix of some stop string.
  std::size_t partial_match_bytes() const;

  std::vector<std::string> stop_strings_;
  std::string held_;  // text received but not yet released
  bool stopped_ = false;
};

}  // namespace pensieve::model
