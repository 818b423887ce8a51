#include "gpu/text/jinja/lexer.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace pensieve::text::jinja {

std::string located(SourcePos at, std::string_view what) {
  return "line " + std::to_string(at.line) + ", column " + std::to_string(at.column) + ": " +
         std::string(what);
}

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_word(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// The source after HF's textual pre-pass, with each byte's offset in the
// original so errors point at what the author wrote.
struct Prepared {
  std::string text;
  std::vector<std::uint32_t> origin;
  void put(char c, std::size_t from) {
    text += c;
    origin.push_back(std::uint32_t(from));
  }
};

// Removes {% generation %} / {% endgeneration %} (transformers' marker for
// assistant masks) with the whitespace its - controls ask for.
Prepared drop_generation_tags(const Prepared& in) {
  Prepared out;
  const std::string& s = in.text;
  std::size_t i = 0;
  while (i < s.size()) {
    // A run of whitespace, then possibly the tag.
    std::size_t ws_end = i;
    while (ws_end < s.size() && is_space(s[ws_end])) ++ws_end;
    bool matched = false;
    if (ws_end + 1 < s.size() && s[ws_end] == '{' && s[ws_end + 1] == '%') {
      std::size_t p = ws_end + 2;
      const bool lstrip = p < s.size() && s[p] == '-';
      if (lstrip) ++p;
      while (p < s.size() && is_space(s[p])) ++p;
      if (s.compare(p, 3, "end") == 0) p += 3;
      if (s.compare(p, 10, "generation") == 0) {
        p += 10;
        while (p < s.size() && is_space(s[p])) ++p;
        const bool rstrip = p < s.size() && s[p] == '-';
        if (rstrip) ++p;
        if (s.compare(p, 2, "%}") == 0) {
          p += 2;
          std::size_t after_end = p;
          while (after_end < s.size() && is_space(s[after_end])) ++after_end;
          if (!lstrip) {
            for (std::size_t k = i; k < ws_end; ++k) out.put(s[k], in.origin[k]);
          }
          if (!rstrip) {
            for (std::size_t k = p; k < after_end; ++k) out.put(s[k], in.origin[k]);
          }
          i = after_end;
          matched = true;
        }
      }
    }
    if (!matched) {
      const std::size_t stop = ws_end == i ? i + 1 : ws_end;
      for (std::size_t k = i; k < stop; ++k) out.put(s[k], in.origin[k]);
      i = stop;
    }
  }
  return out;
}

Prepared prepare(std::string_view source) {
  if (!source.empty() && source.back() == '\n') source.remove_suffix(1);
  // lstrip_blocks: spaces and tabs from a line's start up to {% or {# (or {-).
  Prepared lstripped;
  for (std::size_t i = 0; i < source.size();) {
    if (i == 0 || source[i - 1] == '\n') {
      std::size_t j = i;
      while (j < source.size() && (source[j] == ' ' || source[j] == '\t')) ++j;
      if (j > i && j + 1 < source.size() && source[j] == '{' &&
          (source[j + 1] == '#' || source[j + 1] == '%' || source[j + 1] == '-')) {
        i = j;
      }
    }
    lstripped.put(source[i], i);
    ++i;
  }
  // trim_blocks: the newline right after %} or #} (or -}).
  Prepared trimmed;
  const std::string& s = lstripped.text;
  for (std::size_t i = 0; i < s.size(); ++i) {
    trimmed.put(s[i], lstripped.origin[i]);
    if (s[i] == '}' && i > 0 && (s[i - 1] == '#' || s[i - 1] == '%' || s[i - 1] == '-') &&
        i + 1 < s.size() && s[i + 1] == '\n') {
      ++i;
    }
  }
  return drop_generation_tags(trimmed);
}

struct Fixed {
  std::string_view seq;
  Tok type;
};
constexpr std::array<Fixed, 29> fixed_tokens = {{
    {"{%", Tok::open_statement},
    {"%}", Tok::close_statement},
    {"{{", Tok::open_expression},
    {"}}", Tok::close_expression},
    {"(", Tok::open_paren},
    {")", Tok::close_paren},
    {"{", Tok::open_curly},
    {"}", Tok::close_curly},
    {"[", Tok::open_square},
    {"]", Tok::close_square},
    {",", Tok::comma},
    {".", Tok::dot},
    {":", Tok::colon},
    {"|", Tok::pipe},
    {"<=", Tok::comparison},
    {">=", Tok::comparison},
    {"==", Tok::comparison},
    {"!=", Tok::comparison},
    {"<", Tok::comparison},
    {">", Tok::comparison},
    {"+", Tok::additive},
    {"-", Tok::additive},
    {"~", Tok::additive},
    {"**", Tok::power},
    {"*", Tok::multiplicative},
    {"//", Tok::multiplicative},
    {"/", Tok::multiplicative},
    {"%", Tok::multiplicative},
    {"=", Tok::equals},
}};

void put_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string_view original) : original_(original), src_(prepare(original)) {
    line_starts_.push_back(0);
    for (std::size_t k = 0; k < original_.size(); ++k) {
      if (original_[k] == '\n') line_starts_.push_back(k + 1);
    }
  }

  Result<std::vector<Token>> run();

 private:
  struct LexError {
    std::size_t at;
    std::string what;
  };
  const std::string& s() const { return src_.text; }
  char at(std::size_t i) const { return i < s().size() ? s()[i] : '\0'; }
  SourcePos pos_of(std::size_t i) const;
  void push(Tok t, std::string v, std::size_t from) {
    tokens_.push_back({t, std::move(v), pos_of(from)});
  }
  Tok last_type() const { return tokens_.back().type; }
  void strip_trailing_whitespace();
  void skip_whitespace() {
    while (cur_ < s().size() && is_space(s()[cur_])) ++cur_;
  }
  void lex_text();
  void lex_comment();
  void lex_in_tag();
  std::string lex_string(char quote);

  std::string_view original_;
  Prepared src_;
  std::size_t cur_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> tokens_;
  std::vector<std::size_t> line_starts_;
};

SourcePos Lexer::pos_of(std::size_t i) const {
  const std::size_t off = std::min<std::size_t>(
      i < src_.origin.size() ? src_.origin[i] : original_.size(), original_.size());
  const auto line = std::upper_bound(line_starts_.begin(), line_starts_.end(), off) - 1;
  SourcePos p;
  p.line = std::uint32_t(line - line_starts_.begin() + 1);
  for (std::size_t k = *line; k < off; ++k) {
    if ((static_cast<unsigned char>(original_[k]) & 0xC0) != 0x80) ++p.column;
  }
  return p;
}

void Lexer::strip_trailing_whitespace() {
  if (tokens_.empty() || tokens_.back().type != Tok::text) return;
  std::string& v = tokens_.back().value;
  while (!v.empty() && is_space(v.back())) v.pop_back();
  if (v.empty()) tokens_.pop_back();
}

void Lexer::lex_text() {
  const std::size_t begin = cur_;
  while (cur_ < s().size() && !(s()[cur_] == '{' && (at(cur_ + 1) == '%' || at(cur_ + 1) == '{' ||
                                                     at(cur_ + 1) == '#'))) {
    ++cur_;
  }
  if (cur_ > begin) push(Tok::text, s().substr(begin, cur_ - begin), begin);
}

void Lexer::lex_comment() {
  const std::size_t begin = cur_;
  cur_ += 2;
  const bool strip_before = at(cur_) == '-';
  if (strip_before) ++cur_;
  const std::size_t end = s().find("#}", cur_);
  if (end == std::string::npos) throw LexError{begin, "comment {# is never closed with #}"};
  const bool strip_after = end > cur_ && s()[end - 1] == '-';
  if (strip_before) strip_trailing_whitespace();
  push(Tok::comment, {}, begin);
  cur_ = end + 2;
  if (strip_after) skip_whitespace();
}

std::string Lexer::lex_string(char quote) {
  const std::size_t begin = cur_;
  ++cur_;
  std::string out;
  while (true) {
    if (cur_ >= s().size()) throw LexError{begin, "string literal is never closed"};
    const char c = s()[cur_];
    if (c == quote) break;
    if (c != '\\') {
      out += c;
      ++cur_;
      continue;
    }
    const char e = at(cur_ + 1);
    cur_ += 2;
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case 'x':
      case 'u': {
        const std::size_t n = e == 'x' ? 2 : 4;
        std::uint32_t cp = 0;
        for (std::size_t k = 0; k < n; ++k) {
          const char h = at(cur_ + k);
          const int d = is_digit(h)              ? h - '0'
                        : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                        : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                 : -1;
          if (d < 0) throw LexError{cur_ - 2, "invalid hexadecimal escape in a string literal"};
          cp = cp * 16 + std::uint32_t(d);
        }
        cur_ += n;
        put_utf8(out, cp);
        break;
      }
      default:
        throw LexError{cur_ - 2, std::string("unsupported escape \\") +
                                     (e == '\0' ? std::string() : std::string(1, e)) +
                                     " in a string literal"};
    }
  }
  ++cur_;
  return out;
}

void Lexer::lex_in_tag() {
  if (s().compare(cur_, 3, "{%-") == 0 || s().compare(cur_, 3, "{{-") == 0) {
    strip_trailing_whitespace();
    const bool statement = s()[cur_ + 1] == '%';
    push(statement ? Tok::open_statement : Tok::open_expression, statement ? "{%" : "{{", cur_);
    if (!statement) curly_depth_ = 0;
    cur_ += 3;
    return;
  }
  skip_whitespace();
  if (cur_ >= s().size()) return;
  if (s().compare(cur_, 3, "-%}") == 0 || s().compare(cur_, 3, "-}}") == 0) {
    const bool statement = s()[cur_ + 1] == '%';
    push(statement ? Tok::close_statement : Tok::close_expression, statement ? "%}" : "}}", cur_);
    cur_ += 3;
    skip_whitespace();
    return;
  }
  const char c = s()[cur_];
  if ((c == '-' || c == '+') && !tokens_.empty()) {
    const Tok last = last_type();
    if (last == Tok::text) throw LexError{cur_, std::string("unexpected character '") + c + "'"};
    if (last != Tok::identifier && last != Tok::number && last != Tok::string &&
        last != Tok::close_paren && last != Tok::close_square) {
      const std::size_t begin = cur_++;
      std::string num;
      while (is_digit(at(cur_))) num += s()[cur_++];
      if (!num.empty() && at(cur_) == '.' && is_digit(at(cur_ + 1))) {
        num += s()[cur_++];
        while (is_digit(at(cur_))) num += s()[cur_++];
      }
      push(num.empty() ? Tok::unary : Tok::number, std::string(1, c) + num, begin);
      return;
    }
  }
  for (const Fixed& f : fixed_tokens) {
    if (f.seq == "}}" && curly_depth_ > 0) continue;
    if (s().compare(cur_, f.seq.size(), f.seq) != 0) continue;
    push(f.type, std::string(f.seq), cur_);
    if (f.type == Tok::open_expression) curly_depth_ = 0;
    if (f.type == Tok::open_curly) ++curly_depth_;
    if (f.type == Tok::close_curly) --curly_depth_;
    cur_ += f.seq.size();
    return;
  }
  const std::size_t begin = cur_;
  if (c == '\'' || c == '"') {
    std::string v = lex_string(c);
    push(Tok::string, std::move(v), begin);
    return;
  }
  if (is_digit(c)) {
    std::string num;
    while (is_digit(at(cur_))) num += s()[cur_++];
    const bool after_dot = !tokens_.empty() && last_type() == Tok::dot;
    if (!after_dot && at(cur_) == '.' && is_digit(at(cur_ + 1))) {
      num += s()[cur_++];
      while (is_digit(at(cur_))) num += s()[cur_++];
    }
    push(Tok::number, std::move(num), begin);
    return;
  }
  if (is_word(c)) {
    while (is_word(at(cur_))) ++cur_;
    push(Tok::identifier, s().substr(begin, cur_ - begin), begin);
    return;
  }
  throw LexError{cur_, std::string("unexpected character '") + c + "'"};
}

Result<std::vector<Token>> Lexer::run() {
  try {
    while (cur_ < s().size()) {
      const bool text_mode = tokens_.empty() || last_type() == Tok::close_statement ||
                             last_type() == Tok::close_expression || last_type() == Tok::comment;
      if (text_mode) {
        const std::size_t before = cur_;
        lex_text();
        if (cur_ != before) continue;
      }
      if (s()[cur_] == '{' && at(cur_ + 1) == '#') {
        lex_comment();
        continue;
      }
      lex_in_tag();
    }
  } catch (const LexError& e) {
    return fail(located(pos_of(e.at), e.what));
  }
  return std::move(tokens_);
}

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source) {
  return Lexer(source).run();
}

}  // namespace pensieve::text::jinja
