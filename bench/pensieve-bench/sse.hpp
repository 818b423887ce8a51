#pragma once
// The client side of an OpenAI streamed chat completion: Server-Sent Events
// framing (SseParser) and what the events say (StreamRecorder: text, token
// timings, usage, errors). Pure: the caller supplies bytes and timestamps.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pensieve::bench {

// Splits a byte stream into SSE events. Bytes may arrive cut anywhere; an
// event is dispatched at its blank line. Only `data:` fields matter here
// (several in one event are joined with '\n'); comments and other fields
// are ignored.
class SseParser {
 public:
  // Returns the data of every event completed by these bytes, in order.
  std::vector<std::string> feed(std::string_view bytes);

 private:
  void take_line(std::string_view line, std::vector<std::string>& events);
  std::string partial_line_;
  std::string data_;
  bool has_data_ = false;
};

struct StreamUsage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::int64_t cached_tokens = 0;
};

// Reads the data of chat.completion.chunk events as they arrive at time t
// (seconds since the request was sent).
class StreamRecorder {
 public:
  void on_event(std::string_view data, double t_s);

  const std::string& text() const { return text_; }
  std::optional<double> first_token_s() const { return first_token_s_; }
  // Gaps between successive events that carried text.
  const std::vector<double>& inter_token_s() const { return inter_token_s_; }
  std::int64_t content_events() const { return content_events_; }
  const std::optional<StreamUsage>& usage() const { return usage_; }
  const std::string& finish_reason() const { return finish_reason_; }
  bool done() const { return done_; }                  // saw "data: [DONE]"
  const std::string& error() const { return error_; }  // empty when none

 private:
  std::string text_;
  std::optional<double> first_token_s_;
  double last_token_s_ = 0.0;
  std::vector<double> inter_token_s_;
  std::int64_t content_events_ = 0;
  std::optional<StreamUsage> usage_;
  std::string finish_reason_;
  bool done_ = false;
  std::string error_;
};

}  // namespace pensieve::bench
