#include "gpu/text/pre_tokenizer.hpp"

#include "gpu/text/unicode_tables.hpp"

#include <cstdint>

namespace pensieve::model {

namespace {

using unicode::is_letter;
using unicode::is_number;
using unicode::is_whitespace;

// A run of code points [begin, end) of the text; the regex is applied to each
// fragment on its own, so look-ahead stops at the fragment end.
struct Fragment {
  std::size_t begin;
  std::size_t end;
};

// Walks one fragment and records where each word ends.
class Splitter {
 public:
  Splitter(const std::vector<std::uint32_t>& cpts, Fragment fragment, std::vector<std::size_t>& ends)
      : cpts_(cpts), fragment_(fragment), ends_(ends), prev_end_(fragment.begin) {}

  void split_gpt2();
  void split_llama3(std::size_t max_digits);

 private:
  static constexpr std::uint32_t out_of_range = 0xFFFFFFFF;

  bool inside(std::size_t pos) const { return pos >= fragment_.begin && pos < fragment_.end; }
  std::uint32_t cpt(std::size_t pos) const { return inside(pos) ? cpts_[pos] : out_of_range; }
  bool letter(std::size_t pos) const { return inside(pos) && is_letter(cpts_[pos]); }
  bool number(std::size_t pos) const { return inside(pos) && is_number(cpts_[pos]); }
  bool space(std::size_t pos) const { return inside(pos) && is_whitespace(cpts_[pos]); }
  // [^\s\p{L}\p{N}] at a position inside the fragment
  bool other(std::size_t pos) const {
    return inside(pos) && !is_whitespace(cpts_[pos]) && !is_letter(cpts_[pos]) &&
           !is_number(cpts_[pos]);
  }
  static bool is_newline(std::uint32_t c) { return c == '\r' || c == '\n'; }
  static std::uint32_t ascii_lower(std::uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

  // Ends the current word at `end` (empty words are dropped); returns its length.
  std::size_t add_word(std::size_t end) {
    const std::size_t length = end - prev_end_;
    if (length > 0) ends_.push_back(end);
    prev_end_ = end;
    return length;
  }

  // Length of 's|'t|'re|'ve|'m|'ll|'d at pos (0 when none).
  std::size_t contraction_at(std::size_t pos, bool ignore_case) const;
  // \s+(?!\S)|\s+ and, for llama3, \s*[\r\n]+ first; returns false when pos is not whitespace.
  bool whitespace_word(std::size_t& pos, bool newline_rule);

  const std::vector<std::uint32_t>& cpts_;
  Fragment fragment_;
  std::vector<std::size_t>& ends_;
  std::size_t prev_end_;
};

std::size_t Splitter::contraction_at(std::size_t pos, bool ignore_case) const {
  if (cpt(pos) != '\'' || !inside(pos + 1)) return 0;
  auto fold = [&](std::uint32_t c) { return ignore_case ? ascii_lower(c) : c; };
  const std::uint32_t next = fold(cpt(pos + 1));
  if (next == 's' || next == 't' || next == 'm' || next == 'd') return 2;
  if (!inside(pos + 2)) return 0;
  const std::uint32_t next2 = fold(cpt(pos + 2));
  if ((next == 'r' && next2 == 'e') || (next == 'v' && next2 == 'e') || (next == 'l' && next2 == 'l')) {
    return 3;
  }
  return 0;
}

bool Splitter::whitespace_word(std::size_t& pos, bool newline_rule) {
  std::size_t count = 0;
  std::size_t last_newline_end = 0;
  while (space(pos + count)) {
    if (is_newline(cpt(pos + count))) last_newline_end = pos + count + 1;
    ++count;
  }
  if (newline_rule && last_newline_end > 0) {  // \s*[\r\n]+
    pos = last_newline_end;
    add_word(pos);
    return true;
  }
  if (count > 1 && inside(pos + count)) {  // \s+(?!\S): leave one space for the next word
    pos += count - 1;
    add_word(pos);
    return true;
  }
  if (count > 0) {  // \s+
    pos += count;
    add_word(pos);
    return true;
  }
  return false;
}

void Splitter::split_gpt2() {
  for (std::size_t pos = fragment_.begin; pos < fragment_.end;) {
    if (const std::size_t n = contraction_at(pos, false); n > 0) {
      pos += add_word(pos + n);
      continue;
    }
    const bool leading_space = cpt(pos) == ' ';
    const std::size_t body = pos + (leading_space ? 1 : 0);
    if (letter(body)) {  // ' ?\p{L}+'
      pos = body;
      while (letter(pos)) ++pos;
      add_word(pos);
      continue;
    }
    if (number(body)) {  // ' ?\p{N}+'
      pos = body;
      while (number(pos)) ++pos;
      add_word(pos);
      continue;
    }
    if (other(body)) {  // ' ?[^\s\p{L}\p{N}]+'
      pos = body;
      while (other(pos)) ++pos;
      add_word(pos);
      continue;
    }
    if (whitespace_word(pos, false)) continue;
    add_word(++pos);
  }
}

void Splitter::split_llama3(std::size_t max_digits) {
  for (std::size_t pos = fragment_.begin; pos < fragment_.end;) {
    const std::uint32_t c = cpt(pos);
    if (const std::size_t n = contraction_at(pos, true); n > 0) {
      pos += add_word(pos + n);
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!is_newline(c) && !number(pos) && (letter(pos) || letter(pos + 1))) {
      ++pos;
      while (letter(pos)) ++pos;
      add_word(pos);
      continue;
    }
    if (number(pos)) {  // \p{N}{1,max_digits}
      std::size_t start = pos;
      while (number(pos)) {
        if (++pos - start >= max_digits) {
          add_word(pos);
          start = pos;
        }
      }
      add_word(pos);
      continue;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    const std::size_t body = pos + (c == ' ' ? 1 : 0);
    if (other(body)) {
      pos = body;
      while (other(pos)) ++pos;
      while (is_newline(cpt(pos))) ++pos;
      add_word(pos);
      continue;
    }
    if (whitespace_word(pos, true)) continue;
    add_word(++pos);
  }
}

// Each \p{N} becomes its own fragment, and so does each run between them.
std::vector<Fragment> split_digits(const std::vector<std::uint32_t>& cpts) {
  std::vector<Fragment> fragments;
  std::size_t start = 0;
  for (std::size_t i = 0; i < cpts.size(); ++i) {
    if (!is_number(cpts[i])) continue;
    if (i > start) fragments.push_back({start, i});
    fragments.push_back({i, i + 1});
    start = i + 1;
  }
  if (start < cpts.size()) fragments.push_back({start, cpts.size()});
  return fragments;
}

}  // namespace

Result<PreTokenizer> pre_tokenizer_from_name(std::string_view name) {
  if (name.empty() || name == "default" || name == "gpt2" || name == "gpt-2" || name == "mpt" ||
      name == "olmo" || name == "jais") {
    return PreTokenizer::gpt2;
  }
  if (name == "llama3" || name == "llama-bpe" || name == "llama-v3" || name == "dbrx" ||
      name == "smaug-bpe") {
    return PreTokenizer::llama3;
  }
  if (name == "qwen2" || name == "stablelm2") return PreTokenizer::qwen2;
  if (name == "starcoder" || name == "smollm" || name == "refact" || name == "command-r" ||
      name == "codeshell" || name == "exaone") {
    return PreTokenizer::digits_then_gpt2;
  }
  return fail("unknown BPE pre-tokenizer '" + std::string(name) +
              "' (known: gpt2, llama3/llama-bpe, qwen2, starcoder/smollm)");
}

std::vector<std::string> pre_tokenize(PreTokenizer kind, std::string_view text) {
  const std::vector<std::uint32_t> cpts = unicode::decode_utf8(text);
  std::vector<Fragment> fragments;
  if (kind == PreTokenizer::digits_then_gpt2) {
    fragments = split_digits(cpts);
  } else if (!cpts.empty()) {
    fragments.push_back({0, cpts.size()});
  }
  std::vector<std::size_t> ends;
  for (const Fragment& fragment : fragments) {
    Splitter splitter(cpts, fragment, ends);
    switch (kind) {
      case PreTokenizer::gpt2:
      case PreTokenizer::digits_then_gpt2: splitter.split_gpt2(); break;
      case PreTokenizer::llama3: splitter.split_llama3(3); break;
      case PreTokenizer::qwen2: splitter.split_llama3(1); break;
    }
  }
  std::vector<std::string> words;
  words.reserve(ends.size());
  std::size_t start = 0;
  for (std::size_t end : ends) {
    std::string word;
    for (std::size_t i = start; i < end; ++i) unicode::append_utf8(word, cpts[i]);
    words.push_back(std::move(word));
    start = end;
  }
  return words;
}

}  // namespace pensieve::model
