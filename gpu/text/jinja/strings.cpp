#include "gpu/text/jinja/strings.hpp"

#include <cmath>
#include <cstdlib>

namespace pensieve::text::jinja {

std::uint32_t decode_utf8(std::string_view s, std::size_t i, std::size_t& len) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  len = 1;
  if (b0 < 0x80) return b0;
  const std::size_t n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0xFFFD;
  std::uint32_t cp = b0 & (0x3F >> (n - 1));
  for (std::size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0xFFFD;
    cp = (cp << 6) | (b & 0x3F);
  }
  len = n;
  return cp;
}

bool is_js_space(std::uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::size_t js_space_prefix(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t len = 1;
    if (!is_js_space(decode_utf8(s, i, len))) break;
    i += len;
  }
  return i;
}

std::size_t js_space_suffix(std::string_view s) {
  std::size_t end = s.size();
  while (end > 0) {
    std::size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && end - start < 4)
      --start;
    std::size_t len = 1;
    const std::uint32_t cp = decode_utf8(s, start, len);
    if (start + len != end || !is_js_space(cp)) break;
    end = start;
  }
  return s.size() - end;
}

std::size_t utf16_length(std::string_view s) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t len = 1;
    n += decode_utf8(s, i, len) >= 0x10000 ? 2 : 1;
    i += len;
  }
  return n;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  }
  return out;
}

std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = char(c - 'a' + 'A');
  }
  return out;
}

std::string js_title(std::string_view s) {
  auto word = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  std::string out(s);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (word(out[i]) && (i == 0 || !word(out[i - 1])) && out[i] >= 'a' && out[i] <= 'z') {
      out[i] = char(out[i] - 'a' + 'A');
    }
  }
  return out;
}

namespace {

std::string_view trimmed(std::string_view s) {
  s.remove_prefix(js_space_prefix(s));
  s.remove_suffix(js_space_suffix(s));
  return s;
}

}  // namespace

std::optional<double> js_string_to_number(std::string_view s) {
  s = trimmed(s);
  if (s.empty()) return 0.0;
  const std::string z(s);
  char* end = nullptr;
  const double d = std::strtod(z.c_str(), &end);
  if (end != z.c_str() + z.size()) return std::nullopt;
  return d;
}

std::optional<double> js_parse_int(std::string_view s) {
  s.remove_prefix(js_space_prefix(s));
  std::size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  double v = 0;
  const std::size_t digits_at = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') v = v * 10 + (s[i++] - '0');
  if (i == digits_at) return std::nullopt;
  return negative ? -v : v;
}

std::optional<double> js_parse_float(std::string_view s) {
  s.remove_prefix(js_space_prefix(s));
  const std::string z(s);
  char* end = nullptr;
  const double d = std::strtod(z.c_str(), &end);
  if (end == z.c_str() || std::isnan(d)) return std::nullopt;
  return d;
}

}  // namespace pensieve::text::jinja
