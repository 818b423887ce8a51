#pragma once
// String helpers with JavaScript's semantics where @huggingface/jinja relies
// on them: trim() strips Unicode white space, length counts UTF-16 units.
// Case mapping is ASCII only (what templates apply it to: roles, keywords).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pensieve::text::jinja {

// The code point at s[i] (U+FFFD for a malformed sequence); len gets its bytes.
std::uint32_t decode_utf8(std::string_view s, std::size_t i, std::size_t& len);
bool is_js_space(std::uint32_t cp);
// Bytes of leading / trailing JavaScript white space.
std::size_t js_space_prefix(std::string_view s);
std::size_t js_space_suffix(std::string_view s);
std::size_t utf16_length(std::string_view s);
std::string ascii_lower(std::string_view s);
std::string ascii_upper(std::string_view s);
std::string js_title(std::string_view s);  // upper-cases the first \w after a non-\w
// Number(s) for the strings == compares with numbers.
std::optional<double> js_string_to_number(std::string_view s);
// parseInt(s, 10) / parseFloat(s).
std::optional<double> js_parse_int(std::string_view s);
std::optional<double> js_parse_float(std::string_view s);

}  // namespace pensieve::text::jinja
