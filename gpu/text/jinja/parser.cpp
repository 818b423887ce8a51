#include "gpu/text/jinja/parser.hpp"

#include <cstdlib>
#include <initializer_list>

namespace pensieve::text::jinja {

namespace {

constexpr int max_nesting = 200;

struct ParseError {
  SourcePos at;
  std::string what;
};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  NodePtr program() {
    auto p = node(NodeKind::program, {1, 1});
    while (cur_ < t_.size()) p->body.push_back(any());
    return p;
  }

 private:
  struct Depth {
    Parser& p;
    explicit Depth(Parser& parser) : p(parser) {
      if (++p.depth_ > max_nesting)
        p.error("the template nests deeper than " + std::to_string(max_nesting) + " levels");
    }
    ~Depth() { --p.depth_; }
  };

  static NodePtr node(NodeKind k, SourcePos at) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->at = at;
    return n;
  }
  SourcePos here() const {
    return cur_ < t_.size() ? t_[cur_].at : (t_.empty() ? SourcePos{} : t_.back().at);
  }
  [[noreturn]] void error(std::string what) const { throw ParseError{here(), std::move(what)}; }
  bool is(Tok type, std::size_t ahead = 0) const {
    return cur_ + ahead < t_.size() && t_[cur_ + ahead].type == type;
  }
  bool is_word(std::string_view w, std::size_t ahead = 0) const {
    return is(Tok::identifier, ahead) && t_[cur_ + ahead].value == w;
  }
  bool is_statement(std::initializer_list<std::string_view> names) const {
    if (!is(Tok::open_statement) || !is(Tok::identifier, 1)) return false;
    for (auto n : names) {
      if (t_[cur_ + 1].value == n) return true;
    }
    return false;
  }
  const Token& expect(Tok type, std::string_view what) {
    if (!is(type)) {
      if (cur_ >= t_.size())
        error("the template ends where " + std::string(what) + " was expected");
      error("expected " + std::string(what) + ", found '" + t_[cur_].value + "'");
    }
    return t_[cur_++];
  }
  void expect_word(std::string_view w) {
    if (!is_word(w)) error("expected '" + std::string(w) + "'");
    ++cur_;
  }
  void end_block(std::string_view name) {
    expect(Tok::open_statement, "{% " + std::string(name) + " %}");
    expect_word(name);
    expect(Tok::close_statement, "%}");
  }
  void block_until(std::vector<NodePtr>& into, std::initializer_list<std::string_view> names,
                   std::string_view opener) {
    while (!is_statement(names)) {
      if (cur_ >= t_.size())
        error("the template ends inside {% " + std::string(opener) + " %}, which is never closed");
      into.push_back(any());
    }
  }

  NodePtr any() {
    Depth d(*this);
    const Token& tok = t_[cur_];
    switch (tok.type) {
      case Tok::comment:
        ++cur_;
        return node(NodeKind::comment, tok.at);
      case Tok::text: {
        auto n = node(NodeKind::text, tok.at);
        n->str = tok.value;
        ++cur_;
        return n;
      }
      case Tok::open_statement:
        return statement();
      case Tok::open_expression: {
        ++cur_;
        auto e = expression();
        expect(Tok::close_expression, "}}");
        return e;
      }
      default:
        error("unexpected '" + tok.value + "' outside {{ }} or {% %}");
    }
  }

  NodePtr statement() {
    const SourcePos at = here();
    ++cur_;
    if (!is(Tok::identifier)) error("expected a statement name after {%");
    const std::string name = t_[cur_++].value;
    if (name == "set") return set_statement(at);
    if (name == "if") {
      auto n = if_statement(at);
      end_block("endif");
      return n;
    }
    if (name == "for") return for_statement(at);
    if (name == "macro") return macro_statement(at);
    if (name == "call") return call_statement(at);
    if (name == "filter") return filter_statement(at);
    if (name == "break" || name == "continue") {
      expect(Tok::close_statement, "%}");
      return node(name == "break" ? NodeKind::break_ : NodeKind::continue_, at);
    }
    cur_ -= 1;
    error("unsupported statement '" + name +
          "' (supported: set, if, for, macro, call, filter, break, continue)");
  }

  NodePtr set_statement(SourcePos at) {
    auto n = node(NodeKind::set, at);
    n->a = expression_sequence(false);
    if (is(Tok::equals)) {
      ++cur_;
      n->b = expression_sequence(false);
    } else {
      expect(Tok::close_statement, "= or %}");
      block_until(n->body, {"endset"}, "set");
      expect(Tok::open_statement, "{%");
      expect_word("endset");
    }
    expect(Tok::close_statement, "%}");
    return n;
  }

  NodePtr if_statement(SourcePos at) {
    Depth d(*this);
    auto n = node(NodeKind::if_, at);
    n->a = expression();
    expect(Tok::close_statement, "%}");
    block_until(n->body, {"elif", "else", "endif"}, "if");
    if (is_statement({"elif"})) {
      const SourcePos elif_at = here();
      cur_ += 2;
      n->alt.push_back(if_statement(elif_at));
    } else if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::close_statement, "%}");
      block_until(n->alt, {"endif"}, "if");
    }
    return n;
  }

  NodePtr for_statement(SourcePos at) {
    auto n = node(NodeKind::for_, at);
    n->a = expression_sequence(true);
    if (n->a->kind != NodeKind::identifier && n->a->kind != NodeKind::tuple) {
      error("a for loop's variable must be a name or a tuple of names");
    }
    expect_word("in");
    auto iterable = expression();
    if (iterable->kind == NodeKind::select) {
      n->b = std::move(iterable->a);
      n->c = std::move(iterable->b);
    } else {
      n->b = std::move(iterable);
    }
    expect(Tok::close_statement, "%}");
    block_until(n->body, {"endfor", "else"}, "for");
    if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::close_statement, "%}");
      block_until(n->alt, {"endfor"}, "for");
    }
    end_block("endfor");
    return n;
  }

  NodePtr macro_statement(SourcePos at) {
    auto n = node(NodeKind::macro, at);
    if (!is(Tok::identifier)) error("expected the macro's name");
    n->str = t_[cur_++].value;
    n->args = arguments(true);
    expect(Tok::close_statement, "%}");
    block_until(n->body, {"endmacro"}, "macro");
    end_block("endmacro");
    return n;
  }

  NodePtr call_statement(SourcePos at) {
    auto n = node(NodeKind::call_block, at);
    if (is(Tok::open_paren)) n->args = arguments(true);
    if (!is(Tok::identifier)) error("expected the name of the macro to call");
    auto callee = node(NodeKind::identifier, here());
    callee->str = t_[cur_++].value;
    auto call = node(NodeKind::call, callee->at);
    call->a = std::move(callee);
    call->args = arguments(false);
    n->a = std::move(call);
    expect(Tok::close_statement, "%}");
    block_until(n->body, {"endcall"}, "call");
    end_block("endcall");
    return n;
  }

  NodePtr filter_statement(SourcePos at) {
    auto n = node(NodeKind::filter_block, at);
    n->a = filter_reference();
    expect(Tok::close_statement, "%}");
    block_until(n->body, {"endfilter"}, "filter");
    end_block("endfilter");
    return n;
  }

  // A filter's name, with its arguments when it has them.
  NodePtr filter_reference() {
    if (!is(Tok::identifier)) error("expected a filter name");
    auto id = node(NodeKind::identifier, here());
    id->str = t_[cur_++].value;
    if (!is(Tok::open_paren)) return id;
    auto call = node(NodeKind::call, id->at);
    call->a = std::move(id);
    call->args = arguments(false);
    return call;
  }

  NodePtr expression_sequence(bool primary_only) {
    const SourcePos at = here();
    NodePtr first = primary_only ? primary() : expression();
    if (!is(Tok::comma)) return first;
    auto tuple = node(NodeKind::tuple, at);
    tuple->args.push_back(std::move(first));
    while (is(Tok::comma)) {
      ++cur_;
      tuple->args.push_back(primary_only ? primary() : expression());
    }
    return tuple;
  }

  NodePtr expression() {
    Depth d(*this);
    NodePtr value = logical_or();
    if (!is_word("if")) return value;
    const SourcePos at = here();
    ++cur_;
    NodePtr condition = logical_or();
    if (is_word("else")) {
      ++cur_;
      auto n = node(NodeKind::ternary, at);
      n->a = std::move(condition);
      n->b = std::move(value);
      n->c = expression();
      return n;
    }
    auto n = node(NodeKind::select, at);
    n->a = std::move(value);
    n->b = std::move(condition);
    return n;
  }

  NodePtr binary(std::string op, SourcePos at, NodePtr l, NodePtr r) {
    auto n = node(NodeKind::binary, at);
    n->str = std::move(op);
    n->a = std::move(l);
    n->b = std::move(r);
    return n;
  }

  NodePtr logical_or() {
    NodePtr l = logical_and();
    while (is_word("or")) {
      const SourcePos at = here();
      ++cur_;
      l = binary("or", at, std::move(l), logical_and());
    }
    return l;
  }
  NodePtr logical_and() {
    NodePtr l = logical_not();
    while (is_word("and")) {
      const SourcePos at = here();
      ++cur_;
      l = binary("and", at, std::move(l), logical_not());
    }
    return l;
  }
  NodePtr logical_not() {
    Depth d(*this);
    if (!is_word("not")) return comparison();
    auto n = node(NodeKind::unary, here());
    ++cur_;
    n->str = "not";
    n->a = logical_not();
    return n;
  }
  NodePtr comparison() {
    NodePtr l = additive();
    while (true) {
      const SourcePos at = here();
      std::string op;
      if (is_word("not") && is_word("in", 1)) {
        op = "not in";
        cur_ += 2;
      } else if (is_word("in") || is(Tok::comparison)) {
        op = t_[cur_++].value;
      } else {
        return l;
      }
      l = binary(std::move(op), at, std::move(l), additive());
    }
  }
  NodePtr additive() {
    NodePtr l = multiplicative();
    while (is(Tok::additive)) {
      const Token& op = t_[cur_++];
      l = binary(op.value, op.at, std::move(l), multiplicative());
    }
    return l;
  }
  NodePtr multiplicative() {
    NodePtr l = power();
    while (is(Tok::multiplicative)) {
      const Token& op = t_[cur_++];
      l = binary(op.value, op.at, std::move(l), power());
    }
    return l;
  }
  NodePtr power() {
    NodePtr l = test();
    while (is(Tok::power)) {
      const Token& op = t_[cur_++];
      l = binary(op.value, op.at, std::move(l), test());
    }
    return l;
  }
  NodePtr test() {
    NodePtr operand = filtered();
    while (is_word("is")) {
      auto n = node(NodeKind::test, here());
      ++cur_;
      if (is_word("not")) {
        n->negate = true;
        ++cur_;
      }
      if (!is(Tok::identifier)) error("expected a test name after 'is'");
      n->str = t_[cur_++].value;
      n->a = std::move(operand);
      operand = std::move(n);
    }
    return operand;
  }
  NodePtr filtered() {
    NodePtr operand = unary_sign();
    while (is(Tok::pipe)) {
      auto n = node(NodeKind::filter, here());
      ++cur_;
      n->a = std::move(operand);
      n->b = filter_reference();
      operand = std::move(n);
    }
    return operand;
  }
  NodePtr unary_sign() {
    Depth d(*this);
    if ((is(Tok::unary) || is(Tok::additive)) && (t_[cur_].value == "-" || t_[cur_].value == "+")) {
      auto n = node(NodeKind::unary, here());
      n->str = t_[cur_++].value;
      n->a = unary_sign();
      return n;
    }
    NodePtr m = members(primary());
    while (is(Tok::open_paren)) {
      auto call = node(NodeKind::call, here());
      call->a = std::move(m);
      call->args = arguments(false);
      m = members(std::move(call));
    }
    return m;
  }

  std::vector<NodePtr> arguments(bool parameters) {
    expect(Tok::open_paren, "(");
    std::vector<NodePtr> args;
    bool saw_keyword = false;
    while (!is(Tok::close_paren)) {
      if (cur_ >= t_.size()) error("the template ends inside an argument list");
      const SourcePos at = here();
      if (!parameters && is(Tok::power)) {
        ++cur_;
        auto n = node(NodeKind::keyword_spread, at);
        n->a = expression();
        args.push_back(std::move(n));
        if (is(Tok::comma)) ++cur_;
        if (!is(Tok::close_paren)) error("** must unpack the last argument");
        break;
      }
      NodePtr arg;
      if (!parameters && is(Tok::multiplicative) && t_[cur_].value == "*") {
        ++cur_;
        arg = node(NodeKind::spread, at);
        arg->a = expression();
      } else {
        arg = expression();
        if (is(Tok::equals)) {
          ++cur_;
          if (arg->kind != NodeKind::identifier) error("a keyword argument needs a name before =");
          auto kw = node(NodeKind::keyword_arg, at);
          kw->str = arg->str;
          kw->a = expression();
          arg = std::move(kw);
          saw_keyword = true;
        } else if (saw_keyword) {
          error(parameters ? "a parameter without a default follows one with a default"
                           : "a positional argument follows a keyword argument");
        }
        if (parameters && arg->kind != NodeKind::identifier && arg->kind != NodeKind::keyword_arg) {
          error("a macro parameter must be a name");
        }
      }
      args.push_back(std::move(arg));
      if (is(Tok::comma)) {
        ++cur_;
      } else if (!is(Tok::close_paren)) {
        error("expected , or ) in an argument list");
      }
    }
    ++cur_;
    return args;
  }

  NodePtr members(NodePtr object) {
    while (is(Tok::dot) || is(Tok::open_square)) {
      Depth d(*this);
      const SourcePos at = here();
      const bool computed = t_[cur_++].type == Tok::open_square;
      if (!computed) {
        if (!is(Tok::identifier) && !is(Tok::number)) error("expected a name after '.'");
        auto n = node(NodeKind::member, at);
        n->a = std::move(object);
        n->b = node(NodeKind::literal, here());
        const Token& name = t_[cur_++];
        n->b->value = name.type == Tok::number ? Value::integer(std::atoll(name.value.c_str()))
                                               : Value::markup(name.value);
        object = std::move(n);
        continue;
      }
      std::vector<NodePtr> parts;
      bool is_slice = false;
      while (!is(Tok::close_square)) {
        if (cur_ >= t_.size()) error("the template ends inside [ ]");
        if (is(Tok::colon)) {
          parts.push_back(nullptr);
          ++cur_;
          is_slice = true;
        } else {
          parts.push_back(expression());
          if (is(Tok::colon)) {
            ++cur_;
            is_slice = true;
          } else if (!is(Tok::close_square)) {
            error("expected : or ] in a subscript");
          }
        }
      }
      ++cur_;
      if (parts.empty()) error("a subscript [ ] needs an index or a slice");
      if (is_slice) {
        if (parts.size() > 3) error("a slice has at most start:stop:step");
        auto n = node(NodeKind::slice, at);
        n->a = std::move(object);
        n->args = std::move(parts);
        n->args.resize(3);
        object = std::move(n);
      } else {
        auto n = node(NodeKind::member, at);
        n->a = std::move(object);
        n->b = std::move(parts[0]);
        n->negate = true;  // computed
        object = std::move(n);
      }
    }
    return object;
  }

  NodePtr primary() {
    Depth d(*this);
    if (cur_ >= t_.size()) error("the template ends inside an expression");
    const Token& tok = t_[cur_++];
    switch (tok.type) {
      case Tok::number: {
        auto n = node(NodeKind::literal, tok.at);
        if (tok.value.find('.') != std::string::npos) {
          n->value = Value::floating(std::strtod(tok.value.c_str(), nullptr));
        } else {
          n->value = Value::integer(std::strtoll(tok.value.c_str(), nullptr, 10));
        }
        return n;
      }
      case Tok::string: {
        auto n = node(NodeKind::literal, tok.at);
        std::string s = tok.value;
        while (is(Tok::string)) s += t_[cur_++].value;
        n->value = Value::markup(std::move(s));
        return n;
      }
      case Tok::identifier: {
        auto n = node(NodeKind::identifier, tok.at);
        n->str = tok.value;
        return n;
      }
      case Tok::open_paren: {
        auto e = expression_sequence(false);
        expect(Tok::close_paren, ")");
        return e;
      }
      case Tok::open_square: {
        auto n = node(NodeKind::array, tok.at);
        while (!is(Tok::close_square)) {
          if (cur_ >= t_.size()) error("the template ends inside a list [");
          n->args.push_back(expression());
          if (is(Tok::comma)) {
            ++cur_;
          } else if (!is(Tok::close_square)) {
            error("expected , or ] in a list");
          }
        }
        ++cur_;
        return n;
      }
      case Tok::open_curly: {
        auto n = node(NodeKind::dict, tok.at);
        while (!is(Tok::close_curly)) {
          if (cur_ >= t_.size()) error("the template ends inside a dict {");
          n->args.push_back(expression());
          expect(Tok::colon, ": between a key and its value");
          n->args.push_back(expression());
          if (is(Tok::comma)) {
            ++cur_;
          } else if (!is(Tok::close_curly)) {
            error("expected , or } in a dict");
          }
        }
        ++cur_;
        return n;
      }
      default:
        --cur_;
        error("unexpected '" + tok.value + "' in an expression");
    }
  }

  std::vector<Token> t_;
  std::size_t cur_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<NodePtr> parse_template(std::string_view source) {
  auto tokens = tokenize(source);
  if (!tokens) return tokens.error();
  try {
    return Parser(std::move(*tokens)).program();
  } catch (const ParseError& e) {
    return fail(located(e.at, e.what));
  }
}

}  // namespace pensieve::text::jinja
