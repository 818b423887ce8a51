#pragma once
// Evaluates a parsed template over a context, as @huggingface/jinja does
// (the reference the oracle test compares with byte for byte). Rendering is
// bounded: a step budget (every node evaluated, every element or 64 bytes
// built costs one), a size bound on every string and list built, and a
// nesting bound on macro calls, so no template (however hostile) can loop
// forever, exhaust memory or overflow the stack. Errors name the line and
// column of the node that failed. One render at a time per interpreter.
#include "gpu/text/jinja/ast.hpp"

#include <memory>

namespace pensieve::text::jinja {

struct RenderLimits {
  std::int64_t max_steps = 5'000'000;
  std::size_t max_bytes = std::size_t(16) << 20;  // any one string or list
  int max_depth = 300;                            // nested evaluations
};

struct CallArgs {
  Array positional;
  Object kwargs;
  const Value* kwarg(std::string_view name) const { return kwargs.find(name); }
  // Positional i, else keyword `name`, else null.
  const Value* get(std::size_t i, std::string_view name) const {
    return i < positional.size() ? &positional[i] : kwargs.find(name);
  }
};

struct RenderError {
  SourcePos at;
  std::string what;
};

struct Scope {
  std::shared_ptr<Scope> parent;
  Object vars;
  const Value* lookup(std::string_view name) const;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  explicit Interpreter(RenderLimits limits) : limits_(limits) {}

  // Throws RenderError.
  Text run(const Node& program, const Object& context);

  [[noreturn]] void error(std::string what) const;
  void charge(std::int64_t steps);
  void check_size(std::size_t bytes) const;
  Value call(const Value& fn, CallArgs& args, const ScopePtr& scope);
  const ScopePtr& scope() const { return scope_; }

 private:
  friend struct Evaluator;
  Value eval(const Node& n, const ScopePtr& scope);
  Text block(const std::vector<NodePtr>& body, const ScopePtr& scope);
  Value eval_inner(const Node& n, const ScopePtr& scope);
  Value eval_binary(const Node& n, const ScopePtr& scope);
  Value eval_member(const Node& n, const ScopePtr& scope);
  Value eval_slice(const Node& n, const ScopePtr& scope);
  Value eval_call(const Node& n, const ScopePtr& scope);
  Value eval_for(const Node& n, const ScopePtr& scope);
  Value eval_set(const Node& n, const ScopePtr& scope);
  Value eval_macro(const Node& n, const ScopePtr& scope);
  Value eval_call_block(const Node& n, const ScopePtr& scope);
  CallArgs arguments(const std::vector<NodePtr>& args, const ScopePtr& scope);
  void bind_parameters(const std::vector<NodePtr>& params, bool wants_kwargs, bool wants_varargs,
                       CallArgs& args, const ScopePtr& into, const std::string& name);

  RenderLimits limits_;
  std::int64_t steps_ = 0;
  int depth_ = 0;
  const Node* current_ = nullptr;
  ScopePtr scope_;
  enum class Flow { normal, break_, continue_ } flow_ = Flow::normal;
};

// Built-ins (builtins.cpp).
Value apply_filter(Interpreter& in, const Value& operand, const std::string& name, CallArgs* args,
                   const std::vector<NodePtr>* raw_args);
bool apply_test(Interpreter& in, const std::string& name, const Value& operand, const Value* arg);
bool has_test(std::string_view name);
Value member_of(Interpreter& in, const Value& object, const Value& key);
void install_globals(Object& globals);
Text to_output(Interpreter& in, const Value& v);  // how {{ v }} prints
Text to_concat(Interpreter& in, const Value& v);  // how v prints in ~ and +
struct JsonStyle {
  int indent = 0;  // 0: on one line
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool undefined_as_null = true;
  std::string item_separator, key_separator;  // empty: the defaults
};
Text to_json(Interpreter& in, const Value& v, const JsonStyle& style);
bool loose_equal(const Value& a, const Value& b);
int compare_values(Interpreter& in, const Value& a, const Value& b, bool case_sensitive);
Value replace_text(Interpreter& in, const Text& t, CallArgs& args);
Value dict_builtin(const Value& obj, const std::string& name);
bool strict_equal(const Value& a, const Value& b);

}  // namespace pensieve::text::jinja
