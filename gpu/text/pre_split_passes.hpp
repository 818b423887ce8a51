#pragma once
// The regexes that the pre-tokenizers are made of, each matched by hand over
// code points and their general categories (std::regex has no \p{L}). A pass
// is one regex applied as a Hugging Face Split with behavior "Isolated" (and
// as llama.cpp's unicode_regex_split applies each regex of its lists): every
// match, and every run of text between matches, becomes a fragment, and the
// next pass sees each fragment on its own (look-ahead and `$` stop at the
// fragment's end). Pure functions; any thread.
#include "gpu/text/unicode_tables.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace pensieve::model::pre_split {

// The text as code points with their categories (same length).
struct Text {
  std::span<const std::uint32_t> cpts;
  std::span<const unicode::GeneralCategory> categories;
};

// Code points [begin, end) of the text.
struct Fragment {
  std::size_t begin;
  std::size_t end;
};

enum class Pass : std::uint8_t {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  gpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+    (the case folding is ASCII only, as
  //   llama.cpp's)
  llama3,
  // llama3 with \p{N} in place of \p{N}{1,3}
  qwen2,
  // [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|
  // [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|
  // \p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
  tekken,
  // [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
  //  ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  deepseek_v3_words,
  punctuation_runs,      // [\p{P}\$\+<=>\^~\|]+     (llama.cpp's "default")
  falcon_punctuation,    // [\p{P}\$\+<=>\^~\|`]+
  number_runs,           // \p{N}+
  single_numbers,        // \p{N}
  number_triples,        // \p{N}{1,3}
  ascii_digit_triples,   // [0-9][0-9][0-9]
  newlines,              // [\r\n]
  deepseek_latin,        // \s?[A-Za-zµÀ-ÖØ-öø-ƺ...𞤀-𞥃]+   (deepseek-llm's letter list)
  deepseek_punctuation,  // \s?[!-/:-~！-／：-～‘-‟　-。]+
  trailing_spaces,       // \s+$
  deepseek_cjk,          // [一-龥ࠀ-一가-퟿]+
  cjk_kana,              // [一-龥぀-ゟ゠-ヿ]+
  space_letters,         // \s?\p{L}+
  space_punctuation,     // \s?\p{P}+
};

// Appends the fragments that `pass` splits `fragment` into, in order; they
// cover it exactly.
void apply_pass(Pass pass, const Text& text, Fragment fragment, std::vector<Fragment>& out);

}  // namespace pensieve::model::pre_split
