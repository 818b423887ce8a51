#pragma once
// Tokens to a syntax tree, with @huggingface/jinja's grammar and operator
// precedence (loosest first): inline if, or, and, not, comparisons and in,
// + - ~, * / // %, **, is-tests, | filters, unary - +, calls and members.
// Nesting is bounded so a hostile template cannot exhaust the stack.
#include "gpu/text/jinja/ast.hpp"

#include <string_view>

namespace pensieve::text::jinja {

Result<NodePtr> parse_template(std::string_view source);

}  // namespace pensieve::text::jinja
