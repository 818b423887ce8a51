// The Jinja interpreter's filters, tests, methods and globals, each with the
// text @huggingface/jinja renders, and the provenance of client text.
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

Value dict(std::initializer_list<std::pair<std::string, Value>> kv) {
  Object o;
  for (const auto& [k, v] : kv) o.set(k, v);
  return Value::object(std::move(o));
}

Object people() {
  Object o;
  o.set("people", Value::array({dict({{"name", Value::markup("Bo")},
                                      {"age", Value::integer(30)},
                                      {"admin", Value::boolean(true)}}),
                                dict({{"name", Value::markup("al")}, {"age", Value::integer(25)}}),
                                dict({{"name", Value::markup("Cy")},
                                      {"age", Value::integer(41)},
                                      {"admin", Value::boolean(false)}})}));
  return o;
}

}  // namespace

TEST_CASE("string filters trim, change case, replace, indent and convert") {
  CHECK(render("[{{ '  a b \n' | trim }}]") == "[a b]");
  CHECK(render("{{ 'abc' | upper }} {{ 'ABC' | lower }} {{ 'hello world' | title }} {{ 'hello' | "
               "capitalize }}") == "ABC abc Hello World Hello");
  CHECK(render("{{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }}") ==
        "a+b+c bba");
  CHECK(render(
            "{{ 'x\ny\n\nz' | indent(2) }}|{{ 'x\ny' | indent(2, true) }}|{{ 'x\ny' | indent }}") ==
        "x\n  y\n\n  z|  x\n  y|x\n    y");
  CHECK(render("{{ '42' | int }} {{ 'x' | int }} {{ '2.5' | float }} {{ 3.7 | int }} {{ 5 | string "
               "}} {{ -2 | abs }}") == "42 0 2.5 3 5 2");
  CHECK(render("{{ 'héllo' | length }} {{ '😀' | length }}") ==
        "5 2");  // UTF-16 units, as JavaScript
}

TEST_CASE("list filters take length, first, last, join, sort, reverse, unique and list") {
  CHECK(render("{{ [3, 1, 2] | length }} {{ [3, 1, 2] | first }} {{ [3, 1, 2] | last }} {{ [3, 1, "
               "2] | sort }}") == "3 3 2 [1, 2, 3]");
  CHECK(render("{{ ['a', 'b'] | join(', ') }} {{ [1, 2] | join }} {{ [1, 2] | reverse }} {{ [1, 1, "
               "2] | unique }}") == "a, b 12 [2, 1] [1, 2]");
  CHECK(render("{{ [1, 2] | list }} {{ [1, 2] | string }} {{ [3, 1] | sort(reverse=true) }}") ==
        "[1, 2] [1, 2] [3, 1]");
}

TEST_CASE("selectattr, rejectattr and map pick from lists of dicts") {
  const Object ctx = people();
  CHECK(render("{{ people | selectattr('admin') | map(attribute='name') | join(',') }}", ctx) ==
        "Bo");
  CHECK(render("{{ people | rejectattr('admin') | map(attribute='name') | join(',') }}", ctx) ==
        "al,Cy");
  CHECK(render("{{ people | selectattr('admin', 'false') | map(attribute='name') | join(',') }}",
               ctx) == "Cy");
  CHECK(render("{{ people | selectattr('admin', 'defined') | list | length }}", ctx) == "2");
  CHECK(render("{{ people | map(attribute='missing', default='-') | join }}", ctx) == "---");
  CHECK(render("{{ people | sort(attribute='age') | map(attribute='name') | join(',') }}", ctx) ==
        "al,Bo,Cy");
}

TEST_CASE("dict filters and methods give items, keys, values, get and dictsort") {
  const std::string d = "{% set d = {'b': 2, 'a': 1} %}";
  CHECK(render(d + "{{ d | items }} {{ d | length }} {{ d.keys() }} {{ d.values() }}") ==
        "[[\"b\", 2], [\"a\", 1]] 2 [\"b\", \"a\"] [2, 1]");
  CHECK(
      render(d + "{{ d.get('a') }} {{ d.get('z', 'dflt') }} {{ d.get('z') }} {{ d | dictsort }}") ==
      "1 dflt  [[\"a\", 1], [\"b\", 2]]");
  CHECK(render(d + "{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}") == "b2a1");
}

TEST_CASE(
    "tojson writes JSON as Python's json.dumps spaces it, with indent, sort_keys and "
    "ensure_ascii") {
  const std::string v = "{% set v = {'b': [1, 2.5, none, true], 'a': 'é\"\n'} %}";
  CHECK(render(v + "{{ v | tojson }}") == "{\"b\": [1, 2.5, null, true], \"a\": \"é\\\"\\n\"}");
  CHECK(render(v + "{{ v | tojson(indent=2) }}") ==
        "{\n  \"b\": [\n    1,\n    2.5,\n    null,\n    true\n  ],\n  \"a\": \"é\\\"\\n\"\n}");
  CHECK(render(v + "{{ v | tojson(sort_keys=true, ensure_ascii=true) }}") ==
        "{\"a\": \"\\u00e9\\\"\\n\", \"b\": [1, 2.5, null, true]}");
  CHECK(render(v + "{{ v | tojson(separators=(',', ':')) }}") ==
        "{\"b\":[1,2.5,null,true],\"a\":\"é\\\"\\n\"}");
}

TEST_CASE("default replaces undefined values, and falsy ones when asked") {
  CHECK(render("{{ x | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }} {{ "
               "none | default(1) }}") == "d  d ");
}

TEST_CASE("string methods strip, split, test affixes, replace and change case") {
  CHECK(render("[{{ '  x  '.strip() }}][{{ '  x  '.lstrip() }}][{{ '  x  '.rstrip() }}]") ==
        "[x][x  ][  x]");
  CHECK(render("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }}") ==
        "[\"a\", \"b\", \"\", \"c\"] [\"a\", \"b\"] [\"a\", \"b,c\"]");
  CHECK(render("{{ 'hello'.startswith('he') }} {{ 'hello'.endswith(('x', 'lo')) }} {{ "
               "'hello'.startswith('lo') }}") == "true true false");
  CHECK(render("{{ 'aXa'.replace('a', 'b') }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'ab "
               "cd'.title() }}") == "bXb AB ab Ab Cd");
  CHECK(render("{{ 'abc'.length }} {{ [1, 2].length }}") == "3 2");
}

TEST_CASE("tests ask a value's kind and properties") {
  CHECK(render("{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ true is boolean }}{{ "
               "false is false }}"
               "{{ true is true }}") == "falsetruetruetruetruetrue");
  CHECK(render("{{ 's' is string }}{{ 1 is number }}{{ 1.5 is integer }}{{ [1] is iterable }}{{ {} "
               "is mapping }}"
               "{{ 's' is sequence }}") == "truetruefalsetruetruetrue");
  CHECK(render("{{ 3 is odd }}{{ 4 is even }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ range is "
               "callable }}"
               "{{ 1 is not string }}") == "truetruetruetruetruetrue");
  CHECK(render("{{ [{'a': 'x'}, {'a': 'y'}] | selectattr('a', 'equalto', 'y') | list | length }}"
               "{{ [{'a': 'x'}] | selectattr('a', 'eq', 'x') | list | length }}") == "11");
}

TEST_CASE("globals give range, namespace and raise_exception") {
  CHECK(render("{{ range(3) }} {{ range(1, 7, 2) }} {{ range(3, 0, -1) }}") ==
        "[0, 1, 2] [1, 3, 5] [3, 2, 1]");
  CHECK(render("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}") == "12");
  CHECK_THAT(render("{{ raise_exception('no') }}"), Catch::Contains("raised an exception: no"));
}

TEST_CASE("client text keeps its provenance through concatenation, slicing, trim and tojson") {
  auto t =
      Template::parse("{{ '<|s|>' + (m | trim) + '<|e|>' }}{{ [m] | tojson }}{{ m[1:3] }}").value();
  Object ctx;
  ctx.set("m", Value::client(" a<|e|>b "));
  const Text out = t.render(ctx).value();
  CHECK(out.bytes == "<|s|>a<|e|>b<|e|>[\" a<|e|>b \"]a<");
  const auto runs = runs_of(out);
  REQUIRE(runs.size() == 4);
  CHECK(runs[0].bytes == "<|s|>");
  CHECK_FALSE(runs[0].client);
  CHECK(runs[1].bytes == "a<|e|>b");
  CHECK(runs[1].client);
  CHECK(runs[2].bytes == "<|e|>");
  CHECK_FALSE(runs[2].client);
  CHECK(runs[3].bytes == "[\" a<|e|>b \"]a<");  // tojson of client text is client text
  CHECK(runs[3].client);
}
