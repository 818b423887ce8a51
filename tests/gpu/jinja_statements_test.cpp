// The Jinja interpreter's statements, whitespace control and errors, each
// with the exact text @huggingface/jinja renders (checked by hand against it;
// the real templates are compared with it by tests/gpu/chat_templates).
#include "gpu/text/jinja/template.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace pensieve::text::jinja;

namespace {

std::string render(std::string_view source, Object context = {}) {
  auto t = Template::parse(source);
  if (!t) return "PARSE ERROR: " + t.error().message;
  auto text = t->render(context);
  if (!text) return "RENDER ERROR: " + text.error().message;
  return text->bytes;
}

Object with(std::string key, Value v) {
  Object o;
  o.set(std::move(key), std::move(v));
  return o;
}

Value list(std::initializer_list<Value> items) {
  return Value::array(Array(items));
}

}  // namespace

TEST_CASE("text and expressions render as written") {
  CHECK(render("Hello {{ name }}!", with("name", Value::markup("Ada"))) == "Hello Ada!");
  CHECK(render("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }}") ==
        "7 3 1 1024 3.5");
  CHECK(render("{{ 'a' ~ 1 ~ true }} {{ 'x' + 'y' }}") == "a1true xy");
  CHECK(render("{{ 1.0 }} {{ 2.5 }} {{ -3 }} {{ none }}{{ undefined_name }}") == "1.0 2.5 -3 ");
  CHECK(render("{{ [1, 'a', none] }} {{ {'k': [true]} }}") == "[1, \"a\", null] {\"k\": [true]}");
}

TEST_CASE("if, elif and else pick one branch") {
  const std::string t = "{% if n > 1 %}many{% elif n == 1 %}one{% else %}none{% endif %}";
  CHECK(render(t, with("n", Value::integer(5))) == "many");
  CHECK(render(t, with("n", Value::integer(1))) == "one");
  CHECK(render(t, with("n", Value::integer(0))) == "none");
}

TEST_CASE("for loops bind loop variables, unpack tuples, filter and fall back to else") {
  const Object ctx = with("xs", list({Value::markup("a"), Value::markup("b"), Value::markup("c")}));
  CHECK(render("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ "
               "loop.revindex0 }}"
               "{{ x }}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}{{ loop.length "
               "}};{% endfor %}",
               ctx) == "1032aF3;2121b3;3210cL3;");
  CHECK(render("{% for x in xs %}{{ loop.previtem }}{{ loop.nextitem }},{% endfor %}", ctx) ==
        "b,ac,b,");
  CHECK(render("{% for x in xs if x != 'b' %}{{ x }}{% endfor %}", ctx) == "ac");
  CHECK(render("{% for x in [] %}{{ x }}{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }} {% endfor %}") ==
        "a=1 b=2 ");
  CHECK(render("{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}") == "ab");
  CHECK(render("{% for x in xs %}{% if x == 'b' %}{% continue %}{% endif %}{{ x }}{% endfor %}",
               ctx) == "ac");
  CHECK(render("{% for x in xs %}{% if x == 'b' %}{% break %}{% endif %}{{ x }}{% endfor %}",
               ctx) == "a");
}

TEST_CASE("set assigns names, tuples, blocks and namespace attributes") {
  CHECK(render("{% set a = 1 %}{% set b, c = [2, 3] %}{{ a }}{{ b }}{{ c }}") == "123");
  CHECK(render("{% set s %}in {{ 1 }} block{% endset %}[{{ s }}]") == "[in 1 block]");
  CHECK(render("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% "
               "endfor %}"
               "{{ ns.n }}") == "3");
  // A plain set inside a loop stays in the loop.
  CHECK(render("{% set n = 0 %}{% for i in range(3) %}{% set n = i %}{% endfor %}{{ n }}") == "0");
}

TEST_CASE("macros take positional, keyword and default arguments, and call blocks pass caller()") {
  CHECK(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
               "{{ greet('A') }} {{ greet('B', '?') }} {{ greet(name='C', punct='.') }}") ==
        "Hi A! Hi B? Hi C.");
  CHECK(render(
            "{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}inside{% endcall %}") ==
        "[inside]");
  CHECK(render("{% macro m() %}{{ kwargs.x }}{{ varargs | length }}{% endmacro %}{{ m(1, 2, x='k') "
               "}}") == "k2");
  CHECK_THAT(render("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
             Catch::Contains("takes not more than 1"));
}

TEST_CASE("filter blocks apply a filter to their body") {
  CHECK(render("{% filter upper %}shout {{ 'it' }}{% endfilter %}") == "SHOUT IT");
  CHECK(render("{% filter replace('a', 'o') %}banana{% endfilter %}") == "bonono");
}

TEST_CASE("whitespace control trims around tags, and blocks trim and lstrip as transformers asks") {
  CHECK(render("a  {{- 'b' -}}  c") == "abc");
  CHECK(render("a\n  {%- if true %} b {% endif -%}\n c") == "a b c");
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: the indent before it.
  CHECK(render("{% if true %}\n    x\n    {% endif %}\ny") == "    x\ny");
  CHECK(render("{# a comment #}\nz") == "z");
  CHECK(render("a {#- gone -#} b") == "ab");
  CHECK(render("one\n") == "one");  // a single trailing newline is dropped
  CHECK(render("{% generation %}kept{% endgeneration %}") == "kept");
}

TEST_CASE("inline if, in, not in, and/or and comparisons follow Jinja") {
  CHECK(
      render(
          "{{ 'y' if 2 > 1 else 'n' }}{{ 'y' if false }}{{ 'a' in 'cat' }}{{ 3 not in [1, 2] }}") ==
      "ytruetrue");
  CHECK(render("{{ none or 'd' }} {{ 0 and 1 }} {{ not 0 }} {{ 1 < 2 }} {{ 2 >= 3 }}") ==
        "d 0 true true false");
  CHECK(render("{{ 'k' in {'k': 1} }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ x == none }}") ==
        "true true true true");
}

TEST_CASE("subscripts and slices read lists and strings, negative indices from the end") {
  const Object ctx = with(
      "xs", list({Value::integer(1), Value::integer(2), Value::integer(3), Value::integer(4)}));
  CHECK(render("{{ xs[0] }}{{ xs[-1] }}{{ xs[1:3] }}{{ xs[::-1] }}{{ xs[:-2] }}{{ xs[::2] }}",
               ctx) == "14[2, 3][4, 3, 2, 1][1, 2][1, 3]");
  CHECK(render("{{ 'héllo'[1:3] }}{{ 'abc'[-1] }}{{ 'abc'[::-1] }}") == "élccba");
  CHECK(render("{{ xs[10] is undefined }}", ctx) == "true");
}

TEST_CASE("errors name the line and column and what is not supported") {
  CHECK(render("line one\n{% while true %}") ==
        "PARSE ERROR: line 2, column 4: unsupported statement 'while' (supported: set, if, for, "
        "macro, call, "
        "filter, break, continue)");
  CHECK(render("{{ x | frobnicate }}", with("x", Value::markup("s"))) ==
        "RENDER ERROR: line 1, column 6: unsupported filter 'frobnicate' for a string");
  CHECK(render("ok\n  {{ x is shiny }}") ==
        "RENDER ERROR: line 2, column 8: unsupported test 'is shiny'");
  CHECK(render("{% if x %}never closed") ==
        "PARSE ERROR: line 1, column 11: the template ends inside {% if %}, which is never closed");
  CHECK(render("{{ 'unterminated }}") ==
        "PARSE ERROR: line 1, column 4: string literal is never closed");
  CHECK(render("{{ raise_exception('bad roles') }}") ==
        "RENDER ERROR: line 1, column 19: the template raised an exception: bad roles");
}

TEST_CASE("a step limit ends a runaway render with an error") {
  auto t = Template::parse(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  REQUIRE(t.has_value());
  RenderLimits limits;
  limits.max_steps = 100000;
  auto r = t->render({}, limits);
  REQUIRE_FALSE(r.has_value());
  CHECK_THAT(r.error().message, Catch::Contains("more than 100000 steps"));
}

TEST_CASE("runaway recursion and runaway growth end with errors, not crashes") {
  CHECK_THAT(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"),
             Catch::Contains("nests deeper"));
  CHECK_THAT(
      render("{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
             "{% endfor %}"),
      Catch::Contains("grew past"));
  CHECK_THAT(render("{% set ns = namespace() %}{% set ns.self = ns %}"),
             Catch::Contains("cannot hold a namespace"));
  std::string deep(5000, '(');
  CHECK_THAT(render("{{ " + deep + " }}"), Catch::Contains("nests deeper"));
}
