#pragma once
// Jinja source to tokens, with the whitespace handling HF transformers asks
// of Jinja for chat templates (trim_blocks and lstrip_blocks on, one trailing
// newline dropped, the transformers-only {% generation %} tags removed) and
// the {%- -%} / {{- -}} / {#- -#} controls, as @huggingface/jinja does it.
// Every token knows the line and column of the source it came from.
#include "runtime/error.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pensieve::text::jinja {

struct SourcePos {
  std::uint32_t line = 1;
  std::uint32_t column = 1;
};

// "line 3, column 14: what"
std::string located(SourcePos at, std::string_view what);

enum class Tok {
  text,
  number,
  string,
  identifier,
  equals,
  open_paren,
  close_paren,
  open_statement,
  close_statement,
  open_expression,
  close_expression,
  open_square,
  close_square,
  open_curly,
  close_curly,
  comma,
  dot,
  colon,
  pipe,
  additive,
  multiplicative,
  power,
  comparison,
  unary,
  comment
};

struct Token {
  Tok type;
  std::string value;
  SourcePos at;
};

Result<std::vector<Token>> tokenize(std::string_view source);

}  // namespace pensieve::text::jinja
