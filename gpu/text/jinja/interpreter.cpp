#include "gpu/text/jinja/interpreter.hpp"

#include <cmath>
#include <limits>
#include <optional>

namespace pensieve::text::jinja {

const Value* Scope::lookup(std::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
    if (const Value* v = s->vars.find(name)) return v;
  }
  return nullptr;
}

namespace {

ScopePtr child_of(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

bool mentions(const Node& n, std::string_view name) {
  if (n.kind == NodeKind::identifier && n.str == name) return true;
  for (const Node* k : {n.a.get(), n.b.get(), n.c.get()}) {
    if (k != nullptr && mentions(*k, name)) return true;
  }
  for (const auto* list : {&n.args, &n.body, &n.alt}) {
    for (const auto& k : *list) {
      if (k && mentions(*k, name)) return true;
    }
  }
  return false;
}

bool body_mentions(const std::vector<NodePtr>& body, std::string_view name) {
  for (const auto& n : body) {
    if (n && mentions(*n, name)) return true;
  }
  return false;
}

std::string param_name(const Node& p) {
  return p.str;
}

// Namespaces are the only mutable values; keeping them out of each other
// keeps every value a tree (no reference cycles, no endless tojson).
bool holds_namespace(const Value& v, int depth) {
  if (depth > 64) return true;
  if (v.is(Kind::name_space) || v.is(Kind::function)) return true;
  if (v.is_array_like()) {
    for (const Value& x : v.items()) {
      if (holds_namespace(x, depth + 1)) return true;
    }
  }
  if (v.is_object_like()) {
    for (const auto& [k, x] : v.fields().entries) {
      if (holds_namespace(x, depth + 1)) return true;
    }
  }
  return false;
}

}  // namespace

void Interpreter::error(std::string what) const {
  throw RenderError{current_ != nullptr ? current_->at : SourcePos{}, std::move(what)};
}

void Interpreter::charge(std::int64_t steps) {
  steps_ += steps;
  if (steps_ > limits_.max_steps) {
    error("rendering took more than " + std::to_string(limits_.max_steps) +
          " steps (a runaway loop?)");
  }
}

void Interpreter::check_size(std::size_t bytes) const {
  if (bytes > limits_.max_bytes) {
    error("a value grew past " + std::to_string(limits_.max_bytes) + " bytes while rendering");
  }
}

Text Interpreter::run(const Node& program, const Object& context) {
  auto globals = std::make_shared<Scope>();
  install_globals(globals->vars);
  for (const auto& [k, v] : context.entries) globals->vars.set(k, v);
  scope_ = globals;
  return block(program.body, globals);
}

Text Interpreter::block(const std::vector<NodePtr>& body, const ScopePtr& scope) {
  Text out;
  for (const auto& stmt : body) {
    const Value v = eval(*stmt, scope);
    if (!v.is_nullish()) {
      out.append(to_output(*this, v));
      check_size(out.bytes.size());
    }
    if (flow_ != Flow::normal) break;
  }
  return out;
}

Value Interpreter::eval(const Node& n, const ScopePtr& scope) {
  charge(1);
  if (++depth_ > limits_.max_depth) {
    --depth_;
    error("rendering nests deeper than " + std::to_string(limits_.max_depth) +
          " levels (runaway recursion?)");
  }
  const Node* outer = current_;
  current_ = &n;
  Value v = eval_inner(n, scope);
  current_ = outer;
  --depth_;
  return v;
}

Value Interpreter::eval_inner(const Node& n, const ScopePtr& scope) {
  switch (n.kind) {
    case NodeKind::program:
      return Value::string(block(n.body, scope));
    case NodeKind::text:
      return Value::markup(n.str);
    case NodeKind::comment:
      return Value::none();
    case NodeKind::literal:
      return n.value;
    case NodeKind::identifier: {
      const Value* v = scope->lookup(n.str);
      return v != nullptr ? *v : Value();
    }
    case NodeKind::set:
      return eval_set(n, scope);
    case NodeKind::if_: {
      const bool yes = eval(*n.a, scope).truthy();
      return Value::string(block(yes ? n.body : n.alt, scope));
    }
    case NodeKind::for_:
      return eval_for(n, scope);
    case NodeKind::macro:
      return eval_macro(n, scope);
    case NodeKind::call_block:
      return eval_call_block(n, scope);
    case NodeKind::filter_block: {
      const Value body = Value::string(block(n.body, scope));
      const Node& f = *n.a;
      if (f.kind == NodeKind::identifier) return apply_filter(*this, body, f.str, nullptr, nullptr);
      CallArgs args = arguments(f.args, scope);
      return apply_filter(*this, body, f.a->str, &args, &f.args);
    }
    case NodeKind::break_:
      flow_ = Flow::break_;
      return Value::none();
    case NodeKind::continue_:
      flow_ = Flow::continue_;
      return Value::none();
    case NodeKind::array:
    case NodeKind::tuple: {
      Array items;
      for (const auto& a : n.args) items.push_back(eval(*a, scope));
      return n.kind == NodeKind::array ? Value::array(std::move(items))
                                       : Value::tuple(std::move(items));
    }
    case NodeKind::dict: {
      Object o;
      for (std::size_t i = 0; i + 1 < n.args.size(); i += 2) {
        const Value k = eval(*n.args[i], scope);
        if (!k.is(Kind::string))
          error("a dict key must be a string, not " + std::string(kind_name(k.kind())));
        o.set(k.text().bytes, eval(*n.args[i + 1], scope));
      }
      return Value::object(std::move(o));
    }
    case NodeKind::member:
      return eval_member(n, scope);
    case NodeKind::slice:
      return eval_slice(n, scope);
    case NodeKind::call:
      return eval_call(n, scope);
    case NodeKind::unary: {
      const Value v = eval(*n.a, scope);
      if (n.str == "not") return Value::boolean(!v.truthy());
      const int sign = n.str == "-" ? -1 : 1;
      if (v.is(Kind::floating)) return Value::floating(sign * v.as_number());
      if (v.is(Kind::integer))
        return Value::integer(std::int64_t(std::uint64_t(sign) * std::uint64_t(v.as_int())));
      if (v.is(Kind::boolean)) return Value::integer(sign * int(v.as_bool()));
      error("unary " + n.str + " needs a number, not " + std::string(kind_name(v.kind())));
    }
    case NodeKind::binary:
      return eval_binary(n, scope);
    case NodeKind::filter: {
      const Value operand = eval(*n.a, scope);
      const Node& f = *n.b;
      if (f.kind == NodeKind::identifier)
        return apply_filter(*this, operand, f.str, nullptr, nullptr);
      CallArgs args = arguments(f.args, scope);
      return apply_filter(*this, operand, f.a->str, &args, &f.args);
    }
    case NodeKind::test: {
      const Value operand = eval(*n.a, scope);
      if (!has_test(n.str)) error("unsupported test 'is " + n.str + "'");
      const bool r = apply_test(*this, n.str, operand, nullptr);
      return Value::boolean(n.negate ? !r : r);
    }
    case NodeKind::select:
      return eval(*n.b, scope).truthy() ? eval(*n.a, scope) : Value();
    case NodeKind::ternary:
      return eval(*n.a, scope).truthy() ? eval(*n.b, scope) : eval(*n.c, scope);
    case NodeKind::keyword_arg:
    case NodeKind::spread:
    case NodeKind::keyword_spread:
      error("an argument form used outside a call");
  }
  error("unsupported syntax");
}

namespace {

bool checked_op(char op, std::int64_t a, std::int64_t b, std::int64_t& out) {
  switch (op) {
    case '+':
      return !__builtin_add_overflow(a, b, &out);
    case '-':
      return !__builtin_sub_overflow(a, b, &out);
    case '*':
      return !__builtin_mul_overflow(a, b, &out);
  }
  return false;
}

}  // namespace

Value Interpreter::eval_binary(const Node& n, const ScopePtr& scope) {
  const std::string& op = n.str;
  const Value l = eval(*n.a, scope);
  if (op == "and") return l.truthy() ? eval(*n.b, scope) : l;
  if (op == "or") return l.truthy() ? l : eval(*n.b, scope);
  const Value r = eval(*n.b, scope);
  if (op == "==") return Value::boolean(loose_equal(l, r));
  if (op == "!=") return Value::boolean(!loose_equal(l, r));
  const bool membership = op == "in" || op == "not in";
  if (l.is_undefined() || r.is_undefined()) {
    if (r.is_undefined() && membership) return Value::boolean(op == "not in");
    error("cannot apply " + op + " to an undefined value");
  }
  if (l.is(Kind::none) || r.is(Kind::none)) error("cannot apply " + op + " to none");
  if (op == "~") {
    Text t = to_concat(*this, l);
    t.append(to_concat(*this, r));
    check_size(t.bytes.size());
    charge(std::int64_t(t.bytes.size() / 64));
    return Value::string(std::move(t));
  }
  const bool l_num = l.is_number() || l.is(Kind::boolean);
  const bool r_num = r.is_number() || r.is(Kind::boolean);
  if (op == "**" && l_num && r_num) {
    const double a = l.as_number(), b = r.as_number();
    if (a == 0 && b < 0) error("0.0 cannot be raised to a negative power");
    const double p = std::pow(a, b);
    if (!std::isfinite(p)) error("the power is not a finite number");
    const bool is_float = l.is(Kind::floating) || r.is(Kind::floating) || b < 0;
    if (!is_float && std::abs(p) > 9.007199254740992e15)
      error("the power is too large for an integer");
    return is_float ? Value::floating(p) : Value::integer(std::int64_t(p));
  }
  if (l.is_number() && r.is_number()) {
    const bool is_float = l.is(Kind::floating) || r.is(Kind::floating);
    const double a = l.as_number(), b = r.as_number();
    if (op == "+" || op == "-" || op == "*") {
      if (!is_float) {
        std::int64_t out = 0;
        if (!checked_op(op[0], l.as_int(), r.as_int(), out)) error("integer overflow in " + op);
        return Value::integer(out);
      }
      return Value::floating(op == "+" ? a + b : op == "-" ? a - b : a * b);
    }
    if (op == "/") return Value::floating(a / b);
    if (op == "//" || op == "%") {
      if (!is_float) {
        if (r.as_int() == 0) error("integer division or modulo by zero");
        if (l.as_int() == std::numeric_limits<std::int64_t>::min() && r.as_int() == -1)
          error("integer overflow");
        if (op == "%") return Value::integer(l.as_int() % r.as_int());
        return Value::integer(std::int64_t(std::floor(a / b)));
      }
      return Value::floating(op == "%" ? std::fmod(a, b) : std::floor(a / b));
    }
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == "<=") return Value::boolean(a <= b);
    if (op == ">=") return Value::boolean(a >= b);
  } else if (l.is_array_like() && r.is_array_like()) {
    if (op == "+") {
      Array items = l.items();
      items.insert(items.end(), r.items().begin(), r.items().end());
      check_size(items.size());
      charge(std::int64_t(items.size()));
      return Value::array(std::move(items));
    }
  } else if (r.is_array_like()) {
    if (membership) {
      bool found = false;
      for (const Value& x : r.items()) {
        if (strict_equal(x, l)) {
          found = true;
          break;
        }
      }
      charge(std::int64_t(r.items().size()));
      return Value::boolean(found == (op == "in"));
    }
  }
  if ((l.is(Kind::string) || r.is(Kind::string)) && op == "+") {
    Text t = to_concat(*this, l);
    t.append(to_concat(*this, r));
    check_size(t.bytes.size());
    charge(std::int64_t(t.bytes.size() / 64));
    return Value::string(std::move(t));
  }
  if (l.is(Kind::string) && r.is(Kind::string) && membership) {
    const bool found = r.text().bytes.find(l.text().bytes) != std::string::npos;
    return Value::boolean(found == (op == "in"));
  }
  if (l.is(Kind::string) && r.is_object_like() && membership) {
    const bool found = r.fields().find(l.text().bytes) != nullptr;
    return Value::boolean(found == (op == "in"));
  }
  error("unsupported operator " + op + " between " + std::string(kind_name(l.kind())) + " and " +
        std::string(kind_name(r.kind())));
}

Value Interpreter::eval_member(const Node& n, const ScopePtr& scope) {
  const Value object = eval(*n.a, scope);
  const Value key = n.negate ? eval(*n.b, scope) : n.b->value;
  return member_of(*this, object, key);
}

Value Interpreter::eval_slice(const Node& n, const ScopePtr& scope) {
  const Value object = eval(*n.a, scope);
  if (!object.is_array_like() && !object.is(Kind::string))
    error("only a list or a string can be sliced");
  std::optional<std::int64_t> part[3];
  for (int i = 0; i < 3; ++i) {
    if (!n.args[std::size_t(i)]) continue;
    const Value v = eval(*n.args[std::size_t(i)], scope);
    if (v.is_undefined()) continue;
    if (!v.is(Kind::integer)) error("a slice bound must be an integer");
    part[i] = v.as_int();
  }
  const std::int64_t step = part[2].value_or(1);
  if (step == 0) error("a slice step cannot be zero");
  // Indices of the elements (or code points) the slice takes, as JS slice().
  std::vector<std::size_t> offsets;  // code point starts, for strings
  std::int64_t length = 0;
  if (object.is(Kind::string)) {
    const std::string& s = object.text().bytes;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) offsets.push_back(i);
    }
    length = std::int64_t(offsets.size());
    offsets.push_back(s.size());
  } else {
    length = std::int64_t(object.items().size());
  }
  std::int64_t start = 0, stop = 0;
  if (step > 0) {
    start = part[0].value_or(0);
    start = start < 0 ? std::max<std::int64_t>(length + start, 0) : std::min(start, length);
    stop = part[1].value_or(length);
    stop = stop < 0 ? std::max<std::int64_t>(length + stop, 0) : std::min(stop, length);
  } else {
    start = part[0].value_or(length - 1);
    start = start < 0 ? std::max<std::int64_t>(length + start, -1) : std::min(start, length - 1);
    stop = part[1].value_or(-1);
    stop = stop < -1 ? std::max<std::int64_t>(length + stop, -1) : std::min(stop, length - 1);
  }
  std::vector<std::int64_t> picked;
  const int dir = step > 0 ? 1 : -1;
  for (std::int64_t i = start; dir * i < dir * stop; i += step) picked.push_back(i);
  charge(std::int64_t(picked.size()));
  if (object.is_array_like()) {
    Array items;
    for (const std::int64_t i : picked) items.push_back(object.items()[std::size_t(i)]);
    return Value::array(std::move(items));
  }
  Text out;
  for (const std::int64_t i : picked) {
    const std::size_t b = offsets[std::size_t(i)];
    out.append(object.text().substr(b, offsets[std::size_t(i) + 1] - b));
  }
  return Value::string(std::move(out));
}

CallArgs Interpreter::arguments(const std::vector<NodePtr>& args, const ScopePtr& scope) {
  CallArgs out;
  for (const auto& a : args) {
    if (a->kind == NodeKind::spread) {
      const Value v = eval(*a->a, scope);
      if (!v.is_array_like())
        error("cannot unpack " + std::string(kind_name(v.kind())) + " with *");
      for (const Value& x : v.items()) out.positional.push_back(x);
    } else if (a->kind != NodeKind::keyword_arg && a->kind != NodeKind::keyword_spread) {
      out.positional.push_back(eval(*a, scope));
    }
  }
  for (const auto& a : args) {
    auto add = [&](const std::string& k, Value v) {
      if (out.kwargs.find(k) != nullptr) error("keyword argument '" + k + "' given twice");
      out.kwargs.set(k, std::move(v));
    };
    if (a->kind == NodeKind::keyword_arg) {
      add(a->str, eval(*a->a, scope));
    } else if (a->kind == NodeKind::keyword_spread) {
      const Value v = eval(*a->a, scope);
      if (!v.is_object_like()) error("** needs a mapping, not " + std::string(kind_name(v.kind())));
      for (const auto& [k, x] : v.fields().entries) add(k, x);
    }
  }
  return out;
}

Value Interpreter::call(const Value& fn, CallArgs& args, const ScopePtr& scope) {
  if (!fn.is(Kind::function))
    error("cannot call a " + std::string(kind_name(fn.kind())) + ": it is not a function");
  const ScopePtr outer = scope_;
  scope_ = scope;
  Value v = fn.fn()(*this, args);
  scope_ = outer;
  return v;
}

Value Interpreter::eval_call(const Node& n, const ScopePtr& scope) {
  CallArgs args = arguments(n.args, scope);
  const Value fn = eval(*n.a, scope);
  if (!fn.is(Kind::function)) {
    error("cannot call " +
          (n.a->kind == NodeKind::identifier ? "'" + n.a->str + "'" : std::string("this value")) +
          ": it is " + std::string(kind_name(fn.kind())) + ", not a function");
  }
  return call(fn, args, scope);
}

Value Interpreter::eval_set(const Node& n, const ScopePtr& scope) {
  const Value rhs = n.b ? eval(*n.b, scope) : Value::string(block(n.body, scope));
  const Node& target = *n.a;
  if (target.kind == NodeKind::identifier) {
    scope->vars.set(target.str, rhs);
  } else if (target.kind == NodeKind::tuple) {
    if (!rhs.is_array_like())
      error("cannot unpack " + std::string(kind_name(rhs.kind())) + " in set");
    if (rhs.items().size() != target.args.size()) error("set unpacks the wrong number of values");
    for (std::size_t i = 0; i < target.args.size(); ++i) {
      if (target.args[i]->kind != NodeKind::identifier) error("set can unpack only into names");
      scope->vars.set(target.args[i]->str, rhs.items()[i]);
    }
  } else if (target.kind == NodeKind::member) {
    Value object = eval(*target.a, scope);
    if (!object.is(Kind::name_space)) error("set can assign an attribute only on a namespace()");
    if (target.negate || !target.b->value.is(Kind::string)) error("set ns.NAME needs a plain name");
    if (holds_namespace(rhs, 0))
      error("a namespace attribute cannot hold a namespace or a function");
    object.fields().set(target.b->value.text().bytes, rhs);
  } else {
    error("set can assign only to a name, names, or a namespace attribute");
  }
  return Value::none();
}

Value Interpreter::eval_for(const Node& n, const ScopePtr& scope) {
  ScopePtr loop_scope = child_of(scope);
  Value iterable = eval(*n.b, loop_scope);
  Array items;
  if (iterable.is_object_like()) {
    for (const auto& [k, v] : iterable.fields().entries) {
      items.push_back(iterable.fields().client_keys ? Value::client(k) : Value::markup(k));
    }
  } else if (iterable.is_array_like()) {
    items = iterable.items();
  } else {
    error("a for loop needs a list or a dict, not " + std::string(kind_name(iterable.kind())));
  }
  const Node& target = *n.a;
  auto bind = [&](const ScopePtr& into, const Value& item) {
    if (target.kind == NodeKind::identifier) {
      into->vars.set(target.str, item);
      return;
    }
    if (!item.is_array_like())
      error("cannot unpack " + std::string(kind_name(item.kind())) + " in a for loop");
    if (item.items().size() != target.args.size())
      error("the for loop unpacks the wrong number of values");
    for (std::size_t j = 0; j < target.args.size(); ++j) {
      if (target.args[j]->kind != NodeKind::identifier)
        error("a for loop can unpack only into names");
      into->vars.set(target.args[j]->str, item.items()[j]);
    }
  };
  if (n.c) {
    Array kept;
    for (const Value& item : items) {
      ScopePtr test_scope = child_of(loop_scope);
      bind(test_scope, item);
      if (eval(*n.c, test_scope).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  Text out;
  bool ran = false;
  const auto count = std::int64_t(items.size());
  for (std::int64_t i = 0; i < count; ++i) {
    Object loop;
    loop.set("index", Value::integer(i + 1));
    loop.set("index0", Value::integer(i));
    loop.set("revindex", Value::integer(count - i));
    loop.set("revindex0", Value::integer(count - i - 1));
    loop.set("first", Value::boolean(i == 0));
    loop.set("last", Value::boolean(i == count - 1));
    loop.set("length", Value::integer(count));
    loop.set("previtem", i > 0 ? items[std::size_t(i - 1)] : Value());
    loop.set("nextitem", i < count - 1 ? items[std::size_t(i + 1)] : Value());
    loop_scope->vars.set("loop", Value::object(std::move(loop)));
    bind(loop_scope, items[std::size_t(i)]);
    Text body = block(n.body, loop_scope);
    const Flow flow = std::exchange(flow_, Flow::normal);
    if (flow == Flow::continue_) continue;
    if (flow == Flow::break_) break;
    out.append(body);
    check_size(out.bytes.size());
    ran = true;
  }
  if (!ran) out.append(block(n.alt, loop_scope));
  return Value::string(std::move(out));
}

void Interpreter::bind_parameters(const std::vector<NodePtr>& params, bool wants_kwargs,
                                  bool wants_varargs, CallArgs& args, const ScopePtr& into,
                                  const std::string& name) {
  Object kwargs = std::move(args.kwargs);
  std::vector<const Node*> pending_defaults;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Node& p = *params[i];
    const std::string pname = param_name(p);
    std::optional<Value> v;
    if (i < args.positional.size()) {
      v = args.positional[i];
    } else if (const Value* kw = kwargs.find(pname)) {
      v = *kw;
      kwargs.erase(pname);
    }
    if (!v && p.kind == NodeKind::keyword_arg) pending_defaults.push_back(&p);
    into->vars.set(pname, v.value_or(Value()));
  }
  if (wants_kwargs) {
    into->vars.set("kwargs", Value::object(std::move(kwargs)));
  } else if (!kwargs.entries.empty()) {
    error("macro " + name + " takes no keyword argument '" + kwargs.entries.front().first + "'");
  }
  if (wants_varargs) {
    Array rest;
    for (std::size_t i = params.size(); i < args.positional.size(); ++i)
      rest.push_back(args.positional[i]);
    into->vars.set("varargs", Value::array(std::move(rest)));
  } else if (args.positional.size() > params.size()) {
    error("macro " + name + " takes not more than " + std::to_string(params.size()) +
          " argument(s)");
  }
  for (const Node* p : pending_defaults) into->vars.set(p->str, eval(*p->a, into));
}

Value Interpreter::eval_macro(const Node& n, const ScopePtr& scope) {
  const bool wants_kwargs = body_mentions(n.body, "kwargs");
  const bool wants_varargs = body_mentions(n.body, "varargs");
  const Node* def = &n;
  scope->vars.set(
      n.str, Value::function([def, wants_kwargs, wants_varargs](Interpreter& in, CallArgs& args) {
        ScopePtr macro_scope = child_of(in.scope());
        in.bind_parameters(def->args, wants_kwargs, wants_varargs, args, macro_scope,
                           "'" + def->str + "'");
        return Value::string(in.block(def->body, macro_scope));
      }));
  return Value::none();
}

Value Interpreter::eval_call_block(const Node& n, const ScopePtr& scope) {
  const bool wants_kwargs = body_mentions(n.body, "kwargs");
  const bool wants_varargs = body_mentions(n.body, "varargs");
  const Node* def = &n;
  ScopePtr defined_in = scope;
  Value caller = Value::function(
      [def, defined_in, wants_kwargs, wants_varargs](Interpreter& in, CallArgs& args) {
        ScopePtr body_scope = child_of(defined_in);
        in.bind_parameters(def->args, wants_kwargs, wants_varargs, args, body_scope, "None");
        return Value::string(in.block(def->body, body_scope));
      });
  const Node& call_node = *n.a;
  CallArgs args = arguments(call_node.args, scope);
  const Value fn = eval(*call_node.a, scope);
  ScopePtr with_caller = child_of(scope);
  with_caller->vars.set("caller", std::move(caller));
  return call(fn, args, with_caller);
}

}  // namespace pensieve::text::jinja
