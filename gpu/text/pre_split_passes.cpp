#include "gpu/text/pre_split_passes.hpp"

#include <algorithm>
#include <array>

namespace pensieve::model::pre_split {

namespace {

using unicode::GeneralCategory;

struct CodepointRange {
  std::uint32_t first;
  std::uint32_t last;  // inclusive
};

// The class of deepseek-llm's second Split regex, range by range as its
// tokenizer.json writes it (sorted).
constexpr CodepointRange deepseek_latin_ranges[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},
    {0xD8, 0xF6},       {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},
    {0x295, 0x2AF},     {0x370, 0x373},     {0x376, 0x377},     {0x37B, 0x37D},
    {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},     {0x38C, 0x38C},
    {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},
    {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},
    {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},
    {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},
    {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},
    {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},   {0x2128, 0x2128},
    {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},
    {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},
    {0xA680, 0xA69B},   {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},
    {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

constexpr CodepointRange deepseek_punctuation_ranges[] = {
    {0x21, 0x2F},     {0x3A, 0x7E},     {0x2018, 0x201F},
    {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};

constexpr CodepointRange deepseek_cjk_ranges[] = {{0x0800, 0x9FA5},
                                                  {0xAC00, 0xD7FF}};  // 一-龥 ࠀ-一 가-퟿
constexpr CodepointRange cjk_kana_ranges[] = {{0x3040, 0x30FF},
                                              {0x4E00, 0x9FA5}};  // ぀-ゟ ゠-ヿ 一-龥

template <std::size_t N>
bool in_ranges(const CodepointRange (&ranges)[N], std::uint32_t c) {
  auto it = std::upper_bound(std::begin(ranges), std::end(ranges), c,
                             [](std::uint32_t v, const CodepointRange& r) { return v < r.first; });
  return it != std::begin(ranges) && c <= std::prev(it)->last;
}

bool is_newline(std::uint32_t c) {
  return c == '\r' || c == '\n';
}
bool is_ascii_letter(std::uint32_t c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
bool is_ascii_digit(std::uint32_t c) {
  return c >= '0' && c <= '9';
}
// The ASCII punctuation and symbols: !"#$%&'()*+,-./ :;<=>?@ [\]^_` {|}~
bool is_ascii_punctuation(std::uint32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}

// One fragment being matched: position tests that are false past its end.
class Scan {
 public:
  Scan(const Text& text, Fragment fragment) : text_(text), end_(fragment.end) {}

  std::size_t end() const { return end_; }
  bool inside(std::size_t p) const { return p < end_; }
  // The code point at p; past the end a value no test accepts.
  std::uint32_t cpt(std::size_t p) const { return inside(p) ? text_.cpts[p] : 0xFFFFFFFF; }
  GeneralCategory category(std::size_t p) const { return text_.categories[p]; }

  bool letter(std::size_t p) const { return inside(p) && unicode::is_letter(category(p)); }
  bool number(std::size_t p) const { return inside(p) && unicode::is_number(category(p)); }
  bool mark(std::size_t p) const { return inside(p) && unicode::is_mark(category(p)); }
  bool punctuation(std::size_t p) const {
    return inside(p) && unicode::is_punctuation(category(p));
  }
  bool space(std::size_t p) const { return inside(p) && unicode::is_whitespace(cpt(p)); }
  bool newline(std::size_t p) const { return is_newline(cpt(p)); }
  // [^\s\p{L}\p{N}]
  bool other(std::size_t p) const { return inside(p) && !space(p) && !letter(p) && !number(p); }
  // [^\r\n\p{L}\p{N}]
  bool letter_prefix(std::size_t p) const {
    return inside(p) && !newline(p) && !letter(p) && !number(p);
  }

  // The end of the run of positions from p where `test` holds.
  template <class Test>
  std::size_t run(std::size_t p, Test test) const {
    while (test(p)) ++p;
    return p;
  }
  template <class Test>
  std::size_t run_of(std::size_t p, Test test) const {
    return run(p, [&](std::size_t q) { return inside(q) && test(cpt(q), category(q)); });
  }

 private:
  const Text& text_;
  std::size_t end_;
};

// A matcher returns the end of the match that starts at p, or p for none.
using Matcher = std::size_t (*)(const Scan&, std::size_t);

// 's|'t|'re|'ve|'m|'ll|'d, ASCII letters folded when `fold`.
std::size_t contraction(const Scan& s, std::size_t p, bool fold) {
  if (s.cpt(p) != '\'') return p;
  auto at = [&](std::size_t q) {
    const std::uint32_t c = s.cpt(q);
    return fold && c >= 'A' && c <= 'Z' ? c + 32 : c;
  };
  const std::uint32_t a = at(p + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return p + 2;
  const std::uint32_t b = at(p + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return p + 3;
  return p;
}

// \s*[\r\n]+ (when `newline_rule`), then \s+(?!\S), then \s+.
std::size_t spaces(const Scan& s, std::size_t p, bool newline_rule) {
  if (!s.space(p)) return p;
  const std::size_t e = s.run(p, [&](std::size_t q) { return s.space(q); });
  if (newline_rule) {
    for (std::size_t q = e; q > p; --q) {
      if (s.newline(q - 1)) return q;  // the last newline of the run ends [\r\n]+
    }
  }
  if (e < s.end() && e - p > 1) return e - 1;  // leave one space to lead the next word
  return e;
}

// ` ?X+` where X is `test`, followed by [\r\n]* when `newlines_after`.
template <class Test>
std::size_t space_then_run(const Scan& s, std::size_t p, Test test, bool newlines_after) {
  const std::size_t q = p + (s.cpt(p) == ' ' ? 1 : 0);
  if (!test(q)) return p;
  const std::size_t e = s.run(q, test);
  return newlines_after ? s.run(e, [&](std::size_t r) { return s.newline(r); }) : e;
}

// `\s?X+`: an optional whitespace character of any kind before the run.
template <class Test>
std::size_t any_space_then_run(const Scan& s, std::size_t p, Test test) {
  if (s.space(p) && test(p + 1)) return s.run(p + 1, test);
  if (test(p)) return s.run(p, test);
  return p;
}

// \p{N}{1,max}: scans no further than it takes, so a long digit run stays linear.
std::size_t numbers_up_to(const Scan& s, std::size_t p, std::size_t max) {
  std::size_t e = p;
  while (e - p < max && s.number(e)) ++e;
  return e;
}

std::size_t match_gpt2(const Scan& s, std::size_t p) {
  if (std::size_t e = contraction(s, p, false); e > p) return e;
  for (auto test : {&Scan::letter, &Scan::number, &Scan::other}) {
    if (std::size_t e = space_then_run(
            s, p, [&](std::size_t q) { return (s.*test)(q); }, false);
        e > p)
      return e;
  }
  return spaces(s, p, false);
}

std::size_t match_llama3_family(const Scan& s, std::size_t p, std::size_t max_digits) {
  if (std::size_t e = contraction(s, p, true); e > p) return e;
  const auto letter = [&](std::size_t q) { return s.letter(q); };
  if (s.letter_prefix(p) && s.letter(p + 1)) return s.run(p + 1, letter);
  if (s.letter(p)) return s.run(p, letter);
  if (s.number(p))
    return numbers_up_to(s, p, max_digits);
  if (std::size_t e = space_then_run(
          s, p, [&](std::size_t q) { return s.other(q); }, true);
      e > p)
    return e;
  return spaces(s, p, true);
}

std::size_t match_llama3(const Scan& s, std::size_t p) {
  return match_llama3_family(s, p, 3);
}
std::size_t match_qwen2(const Scan& s, std::size_t p) {
  return match_llama3_family(s, p, 1);
}

// Tekken's letter classes: U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], W = [\p{Ll}\p{Lm}\p{Lo}\p{M}].
bool tekken_upper(const Scan& s, std::size_t p) {
  if (!s.inside(p)) return false;
  const GeneralCategory c = s.category(p);
  return c == GeneralCategory::lu || c == GeneralCategory::lt || c == GeneralCategory::lm ||
         c == GeneralCategory::lo || unicode::is_mark(c);
}
bool tekken_lower(const Scan& s, std::size_t p) {
  if (!s.inside(p)) return false;
  const GeneralCategory c = s.category(p);
  return c == GeneralCategory::ll || c == GeneralCategory::lm || c == GeneralCategory::lo ||
         unicode::is_mark(c);
}

// U*W+ at q: U* greedy, giving back until W+ can start.
std::size_t tekken_upper_then_lower(const Scan& s, std::size_t q) {
  const std::size_t upper_end = s.run(q, [&](std::size_t r) { return tekken_upper(s, r); });
  for (std::size_t k = upper_end + 1; k-- > q;) {
    if (tekken_lower(s, k)) return s.run(k, [&](std::size_t r) { return tekken_lower(s, r); });
  }
  return q;
}

// U+W* at q.
std::size_t tekken_upper_run(const Scan& s, std::size_t q) {
  if (!tekken_upper(s, q)) return q;
  const std::size_t upper_end = s.run(q, [&](std::size_t r) { return tekken_upper(s, r); });
  return s.run(upper_end, [&](std::size_t r) { return tekken_lower(s, r); });
}

std::size_t match_tekken(const Scan& s, std::size_t p) {
  for (auto body : {&tekken_upper_then_lower, &tekken_upper_run}) {
    if (s.letter_prefix(p)) {
      if (std::size_t e = body(s, p + 1); e > p + 1) return e;
    }
    if (std::size_t e = body(s, p); e > p) return e;
  }
  if (s.number(p)) return p + 1;
  const std::size_t q = p + (s.cpt(p) == ' ' ? 1 : 0);
  if (s.other(q)) {
    const std::size_t e = s.run(q, [&](std::size_t r) { return s.other(r); });
    return s.run(e, [&](std::size_t r) { return s.newline(r) || s.cpt(r) == '/'; });
  }
  return spaces(s, p, true);
}

std::size_t match_deepseek_v3_words(const Scan& s, std::size_t p) {
  if (is_ascii_punctuation(s.cpt(p)) && is_ascii_letter(s.cpt(p + 1))) {
    return s.run(p + 1, [&](std::size_t q) { return is_ascii_letter(s.cpt(q)); });
  }
  const auto letter_or_mark = [&](std::size_t q) { return s.letter(q) || s.mark(q); };
  const auto punctuation_or_symbol = [&](std::size_t q) {
    return s.inside(q) &&
           (unicode::is_punctuation(s.category(q)) || unicode::is_symbol(s.category(q)));
  };
  // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
  const bool prefix = s.inside(p) && !s.newline(p) && !s.letter(p) && !punctuation_or_symbol(p);
  if (prefix && letter_or_mark(p + 1)) return s.run(p + 1, letter_or_mark);
  if (letter_or_mark(p)) return s.run(p, letter_or_mark);
  if (std::size_t e = space_then_run(s, p, punctuation_or_symbol, true); e > p) return e;
  return spaces(s, p, true);
}

// [\p{P}\$\+<=>\^~\|]+, with ` too for Falcon: the ASCII symbols that are not \p{P}.
bool llama_punctuation(std::uint32_t c, GeneralCategory g, bool backtick) {
  return unicode::is_punctuation(g) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
         c == '~' || c == '|' || (backtick && c == '`');
}

std::size_t match_punctuation_runs(const Scan& s, std::size_t p) {
  return s.run_of(p, [](std::uint32_t c, GeneralCategory g) { return llama_punctuation(c, g, false); });
}

std::size_t match_falcon_punctuation(const Scan& s, std::size_t p) {
  return s.run_of(p, [](std::uint32_t c, GeneralCategory g) { return llama_punctuation(c, g, true); });
}

std::size_t match_number_runs(const Scan& s, std::size_t p) {
  return s.run(p, [&](std::size_t q) { return s.number(q); });
}
std::size_t match_single_numbers(const Scan& s, std::size_t p) {
  return s.number(p) ? p + 1 : p;
}
std::size_t match_number_triples(const Scan& s, std::size_t p) {
  return numbers_up_to(s, p, 3);
}
std::size_t match_ascii_digit_triples(const Scan& s, std::size_t p) {
  const bool three =
      is_ascii_digit(s.cpt(p)) && is_ascii_digit(s.cpt(p + 1)) && is_ascii_digit(s.cpt(p + 2));
  return three ? p + 3 : p;
}
std::size_t match_newlines(const Scan& s, std::size_t p) {
  return s.newline(p) ? p + 1 : p;
}

std::size_t match_deepseek_latin(const Scan& s, std::size_t p) {
  return any_space_then_run(s, p, [&](std::size_t q) {
    return s.inside(q) && in_ranges(deepseek_latin_ranges, s.cpt(q));
  });
}
std::size_t match_deepseek_punctuation(const Scan& s, std::size_t p) {
  return any_space_then_run(s, p, [&](std::size_t q) {
    return s.inside(q) && in_ranges(deepseek_punctuation_ranges, s.cpt(q));
  });
}
std::size_t match_deepseek_cjk(const Scan& s, std::size_t p) {
  return s.run_of(
      p, [](std::uint32_t c, GeneralCategory) { return in_ranges(deepseek_cjk_ranges, c); });
}
std::size_t match_cjk_kana(const Scan& s, std::size_t p) {
  return s.run_of(p,
                  [](std::uint32_t c, GeneralCategory) { return in_ranges(cjk_kana_ranges, c); });
}
std::size_t match_space_letters(const Scan& s, std::size_t p) {
  return any_space_then_run(s, p, [&](std::size_t q) { return s.letter(q); });
}
std::size_t match_space_punctuation(const Scan& s, std::size_t p) {
  return any_space_then_run(s, p, [&](std::size_t q) { return s.punctuation(q); });
}

// Leftmost matches in order, as a regex search does; text between them is
// kept as its own fragment.
void isolate(Matcher match, const Scan& s, Fragment fragment, std::vector<Fragment>& out) {
  std::size_t gap = fragment.begin;
  for (std::size_t p = fragment.begin; p < fragment.end;) {
    const std::size_t e = match(s, p);
    if (e == p) {
      ++p;
      continue;
    }
    if (gap < p) out.push_back({gap, p});
    out.push_back({p, e});
    p = gap = e;
  }
  if (gap < fragment.end) out.push_back({gap, fragment.end});
}

// \s+$: the first whitespace run that reaches the end is the one ending it.
void isolate_trailing_spaces(const Scan& s, Fragment fragment, std::vector<Fragment>& out) {
  std::size_t start = fragment.end;
  while (start > fragment.begin && s.space(start - 1)) --start;
  if (start > fragment.begin) out.push_back({fragment.begin, start});
  if (start < fragment.end) out.push_back({start, fragment.end});
}

Matcher matcher_of(Pass pass) {
  switch (pass) {
    case Pass::gpt2:
      return &match_gpt2;
    case Pass::llama3:
      return &match_llama3;
    case Pass::qwen2:
      return &match_qwen2;
    case Pass::tekken:
      return &match_tekken;
    case Pass::deepseek_v3_words:
      return &match_deepseek_v3_words;
    case Pass::punctuation_runs:
      return &match_punctuation_runs;
    case Pass::falcon_punctuation:
      return &match_falcon_punctuation;
    case Pass::number_runs:
      return &match_number_runs;
    case Pass::single_numbers:
      return &match_single_numbers;
    case Pass::number_triples:
      return &match_number_triples;
    case Pass::ascii_digit_triples:
      return &match_ascii_digit_triples;
    case Pass::newlines:
      return &match_newlines;
    case Pass::deepseek_latin:
      return &match_deepseek_latin;
    case Pass::deepseek_punctuation:
      return &match_deepseek_punctuation;
    case Pass::deepseek_cjk:
      return &match_deepseek_cjk;
    case Pass::cjk_kana:
      return &match_cjk_kana;
    case Pass::space_letters:
      return &match_space_letters;
    case Pass::space_punctuation:
      return &match_space_punctuation;
    case Pass::trailing_spaces:
      break;
  }
  return nullptr;
}

}  // namespace

void apply_pass(Pass pass, const Text& text, Fragment fragment, std::vector<Fragment>& out) {
  const Scan scan(text, fragment);
  if (pass == Pass::trailing_spaces) {
    isolate_trailing_spaces(scan, fragment, out);
    return;
  }
  isolate(matcher_of(pass), scan, fragment, out);
}

}  // namespace pensieve::model::pre_split
