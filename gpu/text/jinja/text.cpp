#include "gpu/text/jinja/text.hpp"

#include <algorithm>

namespace pensieve::text::jinja {

Text Text::from_client(std::string s) {
  Text t{std::move(s), {}};
  if (!t.bytes.empty()) t.client.push_back({0, std::uint32_t(t.bytes.size())});
  return t;
}

void Text::append(const Text& other) {
  const auto offset = std::uint32_t(bytes.size());
  bytes += other.bytes;
  for (ByteSpan s : other.client) {
    s.begin += offset;
    s.end += offset;
    if (!client.empty() && client.back().end == s.begin) {
      client.back().end = s.end;
    } else {
      client.push_back(s);
    }
  }
}

Text Text::substr(std::size_t pos, std::size_t len) const {
  pos = std::min(pos, bytes.size());
  len = std::min(len, bytes.size() - pos);
  Text out{bytes.substr(pos, len), {}};
  const auto lo = std::uint32_t(pos);
  const auto hi = std::uint32_t(pos + len);
  for (const ByteSpan s : client) {
    const std::uint32_t b = std::max(s.begin, lo);
    const std::uint32_t e = std::min(s.end, hi);
    if (b < e) out.client.push_back({b - lo, e - lo});
  }
  return out;
}

Text Text::derived(std::string new_bytes) const {
  return has_client() ? from_client(std::move(new_bytes)) : markup(std::move(new_bytes));
}

std::vector<TextRun> runs_of(const Text& t) {
  std::vector<TextRun> runs;
  const std::string_view all = t.bytes;
  std::uint32_t at = 0;
  for (const ByteSpan s : t.client) {
    if (s.begin > at) runs.push_back({all.substr(at, s.begin - at), false});
    runs.push_back({all.substr(s.begin, s.end - s.begin), true});
    at = s.end;
  }
  if (at < all.size()) runs.push_back({all.substr(at), false});
  return runs;
}

}  // namespace pensieve::text::jinja
