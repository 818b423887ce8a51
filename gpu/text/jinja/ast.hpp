#pragma once
// The syntax tree of a parsed template. One node type with a kind; which
// fields a kind uses is listed beside it. Immutable after parsing.
#include "gpu/text/jinja/lexer.hpp"
#include "gpu/text/jinja/value.hpp"

#include <memory>
#include <string>
#include <vector>

namespace pensieve::text::jinja {

enum class NodeKind {
  // statements
  program,       // body
  text,          // str
  set,           // a = target, b = value (or body when b is null)
  if_,           // a = condition, body, alt
  for_,          // a = target, b = iterable, c = filter condition (may be null), body, alt (else)
  macro,         // str = name, args = parameters, body
  call_block,    // a = call expression, args = caller parameters, body
  filter_block,  // a = filter (identifier or call), body
  break_,
  continue_,
  comment,
  // expressions
  literal,         // value
  identifier,      // str
  array,           // args
  tuple,           // args
  dict,            // args: key, value, key, value...
  member,          // a = object, b = property expression (computed) or literal (dot)
  slice,           // a = object, args = start, stop, step (each may be null)
  call,            // a = callee, args
  keyword_arg,     // str = name, a = value
  spread,          // a
  keyword_spread,  // a
  unary,           // str = operator, a
  binary,          // str = operator, a, b
  filter,          // a = operand, b = filter (identifier or call)
  test,            // a = operand, str = test name, negate
  select,          // a = value, b = condition (a if b, no else)
  ternary,         // a = condition, b = if true, c = if false
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  NodeKind kind;
  SourcePos at;
  std::string str;
  Value value;
  bool negate = false;
  NodePtr a, b, c;
  std::vector<NodePtr> args, body, alt;
};

}  // namespace pensieve::text::jinja
