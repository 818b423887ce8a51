#pragma once
// Streaming text out of a generator whose tokens may end in the middle of a
// UTF-8 character (byte-fallback tokens, byte-level BPE): feed each token's
// bytes as it comes, and send on only what feed() returns. It never returns
// half a character: an incomplete character is held back until its last byte
// arrives, and a byte sequence that cannot become valid UTF-8 is replaced by
// U+FFFD. One per stream, owned by whoever streams; not thread-safe.
#include <string>
#include <string_view>

namespace pensieve::model {

class Utf8Stream {
 public:
  // The complete characters now available, always valid UTF-8 (maybe empty).
  std::string feed(std::string_view bytes);
  // At the end of the stream: a held-back incomplete character becomes U+FFFD.
  std::string flush();

  std::size_t pending_bytes() const { return pending_.size(); }

 private:
  std::string pending_;  // the start of a character still missing bytes (at most 3 bytes)
};

}  // namespace pensieve::model
