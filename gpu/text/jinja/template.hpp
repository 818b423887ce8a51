#pragma once
// A chat template: Jinja source parsed once, rendered many times. The subset
// is what chat templates use, with @huggingface/jinja's semantics (the
// oracle tests/gpu/chat_templates/ compares against):
//   statements  set (also ns.attr and tuples, and set...endset), if/elif/else,
//               for (tuple targets, `if` filter, else, loop.index/index0/
//               revindex/revindex0/first/last/length/previtem/nextitem),
//               break, continue, macro (defaults, kwargs, varargs), call
//               (with caller()), filter...endfilter, comments
//   expressions literals, lists, dicts, tuples, a.b, a[i], slices a[i:j:k],
//               calls with keywords, * and **, + - * / // % **, ~,
//               == != < > <= >=, in, not in, and/or/not, x if c else y
//   tests       defined undefined none boolean true false string number
//               integer iterable mapping sequence callable odd even lower
//               upper equalto eq
//   filters     trim tojson length join default upper lower title capitalize
//               replace selectattr rejectattr map items list first last
//               string int float abs bool indent reverse sort unique
//               dictsort safe
//   methods     str: strip lstrip rstrip split startswith endswith replace
//               upper lower title capitalize length; dict: get items keys
//               values dictsort; list: length
//   globals     namespace() range() raise_exception() true/false/none
// Anything else is an error naming its line and column. Immutable; any thread.
#include "gpu/text/jinja/interpreter.hpp"

#include <memory>
#include <string_view>

namespace pensieve::text::jinja {

class Template {
 public:
  static Result<Template> parse(std::string_view source);

  // Errors read "line L, column C: what".
  Result<Text> render(const Object& context, const RenderLimits& limits = {}) const;

 private:
  explicit Template(std::shared_ptr<const Node> root) : root_(std::move(root)) {}
  std::shared_ptr<const Node> root_;
};

}  // namespace pensieve::text::jinja
