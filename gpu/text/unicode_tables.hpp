#pragma once
// Unicode facts the tokenizers need, without a Unicode library: the general
// category of each code point as range tables generated from Python's
// unicodedata (tools/gen_unicode_tables.py), the White_Space property, and
// UTF-8 <-> code point conversion with llama.cpp's error rules (an invalid byte
// becomes U+FFFD). Pure functions over constant data; any thread.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pensieve::model::unicode {

// The Unicode general categories, named as in UnicodeData.txt (lower case).
enum class GeneralCategory : std::uint8_t {
  lu, ll, lt, lm, lo,          // letters: upper, lower, title case, modifier, other
  mn, mc, me,                  // marks: non-spacing, spacing, enclosing
  nd, nl, no,                  // numbers: decimal digit, letter, other
  pc, pd, ps, pe, pi, pf, po,  // punctuation
  sm, sc, sk, so,              // symbols: math, currency, modifier, other
  zs, zl, zp,                  // separators
  cc, cf, cs, co, cn,          // control, format, surrogate, private use, unassigned
};

struct CategoryRange {
  std::uint32_t first;
  std::uint32_t last;  // inclusive
  GeneralCategory category;
};

inline constexpr std::uint32_t replacement_character = 0xFFFD;

// Sorted, disjoint ranges of the assigned code points of one major class,
// each in its own generated file (gpu/text/unicode_categories/); together
// they cover every assigned code point once.
std::span<const CategoryRange> letter_ranges();       // L
std::span<const CategoryRange> mark_ranges();         // M
std::span<const CategoryRange> number_ranges();       // N
std::span<const CategoryRange> punctuation_ranges();  // P
std::span<const CategoryRange> symbol_ranges();       // S
std::span<const CategoryRange> separator_ranges();    // Z
std::span<const CategoryRange> other_ranges();        // C but Cn
// The same data for U+0000..U+007F, indexed by code point.
std::span<const GeneralCategory, 128> ascii_categories();

GeneralCategory general_category(std::uint32_t cpt);  // cn where unassigned

constexpr bool is_letter(GeneralCategory c) { return c <= GeneralCategory::lo; }
constexpr bool is_mark(GeneralCategory c) { return c >= GeneralCategory::mn && c <= GeneralCategory::me; }
constexpr bool is_number(GeneralCategory c) { return c >= GeneralCategory::nd && c <= GeneralCategory::no; }
constexpr bool is_punctuation(GeneralCategory c) {
  return c >= GeneralCategory::pc && c <= GeneralCategory::po;
}
constexpr bool is_symbol(GeneralCategory c) { return c >= GeneralCategory::sm && c <= GeneralCategory::so; }

bool is_letter(std::uint32_t cpt);      // \p{L}
bool is_number(std::uint32_t cpt);      // \p{N}
bool is_whitespace(std::uint32_t cpt);  // \s (Unicode White_Space)

// Length of the UTF-8 sequence that `lead` starts, from its high bits alone
// (1 for ASCII and for stray continuation bytes), as SentencePiece splits text.
std::size_t utf8_sequence_length(char lead);

// Decodes UTF-8; each byte that does not start a valid sequence becomes
// U+FFFD and decoding resumes at the next byte.
std::vector<std::uint32_t> decode_utf8(std::string_view text);

void append_utf8(std::string& out, std::uint32_t cpt);
std::string encode_utf8(std::uint32_t cpt);

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or
// truncated sequences).
bool is_valid_utf8(std::string_view text);

}  // namespace pensieve::model::unicode
