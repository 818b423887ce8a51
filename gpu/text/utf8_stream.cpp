#include "gpu/text/utf8_stream.hpp"

#include <cstdint>

namespace pensieve::model {

namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the character a lead byte starts, 0 when it cannot start one
// (continuation bytes, C0/C1 overlongs, F5..FF).
std::size_t sequence_length(std::uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

// Whether `byte` may follow `lead` at position `index` (1-based) of a
// character; the second byte's range excludes overlongs, surrogates and
// code points past U+10FFFF (Unicode table 3-7).
bool valid_continuation(std::uint8_t lead, std::size_t index, std::uint8_t byte) {
  if (index == 1) {
    if (lead == 0xE0) return byte >= 0xA0 && byte <= 0xBF;
    if (lead == 0xED) return byte >= 0x80 && byte <= 0x9F;
    if (lead == 0xF0) return byte >= 0x90 && byte <= 0xBF;
    if (lead == 0xF4) return byte >= 0x80 && byte <= 0x8F;
  }
  return (byte & 0xC0) == 0x80;
}

}  // namespace

std::string Utf8Stream::feed(std::string_view bytes) {
  std::string data = std::move(pending_);
  pending_.clear();
  data.append(bytes);
  std::string out;
  out.reserve(data.size());
  std::size_t i = 0;
  while (i < data.size()) {
    const auto lead = static_cast<std::uint8_t>(data[i]);
    const std::size_t length = sequence_length(lead);
    if (length == 0) {
      out.append(replacement);
      ++i;
      continue;
    }
    std::size_t have = 1;
    while (have < length && i + have < data.size() &&
           valid_continuation(lead, have, static_cast<std::uint8_t>(data[i + have]))) {
      ++have;
    }
    if (have == length) {
      out.append(data, i, length);
    } else if (i + have == data.size()) {
      pending_.assign(data, i, have);  // may still be completed by the next piece
    } else {
      out.append(replacement);  // a broken character: one U+FFFD for its valid prefix
    }
    i += have;
  }
  return out;
}

std::string Utf8Stream::flush() {
  if (pending_.empty()) return {};
  pending_.clear();
  return std::string(replacement);
}

}  // namespace pensieve::model
