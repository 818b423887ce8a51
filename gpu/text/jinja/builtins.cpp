// Printing, equality, tests, globals and member access (string, dict and
// list methods), as @huggingface/jinja defines them. Filters are in filters.cpp.
#include "gpu/text/jinja/interpreter.hpp"
#include "gpu/text/jinja/strings.hpp"

#include <cmath>
#include <cstdio>

namespace pensieve::text::jinja {

namespace {

Text float_output(double d) {
  if (d == 0 && std::signbit(d)) return Text::markup("-0.0");
  if (std::isfinite(d) && d == std::trunc(d) && std::abs(d) < 1e21)
    return Text::markup(js_number(d) + ".0");
  return Text::markup(js_number(d));
}

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      default:
        break;
    }
    char buf[16];
    if (c < 0x20) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else if (ensure_ascii && c >= 0x7f) {
      std::size_t len = 1;
      const std::uint32_t cp = decode_utf8(s, i, len);
      if (cp >= 0x10000) {
        const std::uint32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      }
      out += buf;
      i += len - 1;
    } else {
      out += char(c);
    }
  }
  out += '"';
}

struct JsonWriter {
  Interpreter& in;
  const JsonStyle& style;
  std::string out;
  bool client = false;

  void write(const Value& v, int depth) {
    in.charge(1);
    in.check_size(out.size());
    if (depth > 200) in.error("tojson: the value nests too deeply");
    const std::string item_sep = !style.item_separator.empty() ? style.item_separator
                                 : style.indent > 0            ? ","
                                                               : ", ";
    const std::string key_sep = !style.key_separator.empty() ? style.key_separator : ": ";
    const std::string pad =
        style.indent > 0 ? "\n" + std::string(std::size_t(style.indent * depth), ' ') : "";
    const std::string child_pad =
        style.indent > 0 ? pad + std::string(std::size_t(style.indent), ' ') : "";
    switch (v.kind()) {
      case Kind::undefined:
        out += style.undefined_as_null ? "null" : "undefined";
        return;
      case Kind::none:
        out += "null";
        return;
      case Kind::boolean:
        out += v.as_bool() ? "true" : "false";
        return;
      case Kind::integer:
        out += std::to_string(v.as_int());
        return;
      case Kind::floating:
        out += std::isfinite(v.as_number()) ? js_number(v.as_number()) : "null";
        return;
      case Kind::string:
        client = client || v.text().has_client();
        json_string(out, v.text().bytes, style.ensure_ascii);
        return;
      case Kind::array:
      case Kind::tuple: {
        out += '[';
        const Array& items = v.items();
        for (std::size_t i = 0; i < items.size(); ++i) {
          if (i > 0) out += item_sep;
          out += child_pad;
          write(items[i], depth + 1);
        }
        if (!items.empty()) out += pad;
        out += ']';
        return;
      }
      case Kind::object:
      case Kind::name_space:
      case Kind::kwargs: {
        out += '{';
        client = client || v.fields().client_keys;
        std::vector<const std::pair<std::string, Value>*> entries;
        for (const auto& e : v.fields().entries) entries.push_back(&e);
        if (style.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(),
                           [](auto* a, auto* b) { return a->first < b->first; });
        }
        for (std::size_t i = 0; i < entries.size(); ++i) {
          if (i > 0) out += item_sep;
          out += child_pad;
          json_string(out, entries[i]->first, style.ensure_ascii);
          out += key_sep;
          write(entries[i]->second, depth + 1);
        }
        if (!entries.empty()) out += pad;
        out += '}';
        return;
      }
      case Kind::function:
        in.error("tojson cannot write a function");
    }
  }
};

}  // namespace

Text to_json(Interpreter& in, const Value& v, const JsonStyle& style) {
  JsonWriter w{in, style, {}, false};
  w.write(v, 0);
  return w.client ? Text::from_client(std::move(w.out)) : Text::markup(std::move(w.out));
}

Text to_output(Interpreter& in, const Value& v) {
  switch (v.kind()) {
    case Kind::undefined:
    case Kind::none:
      return {};
    case Kind::boolean:
      return Text::markup(v.as_bool() ? "true" : "false");
    case Kind::integer:
      return Text::markup(std::to_string(v.as_int()));
    case Kind::floating:
      return float_output(v.as_number());
    case Kind::string:
      return v.text();
    case Kind::array:
    case Kind::tuple:
    case Kind::object:
    case Kind::name_space:
    case Kind::kwargs: {
      JsonStyle style;
      style.undefined_as_null = false;
      return to_json(in, v, style);
    }
    case Kind::function:
      in.error("cannot print a function");
  }
  return {};
}

Text to_concat(Interpreter& in, const Value& v) {
  switch (v.kind()) {
    case Kind::string:
      return v.text();
    case Kind::integer:
      return Text::markup(std::to_string(v.as_int()));
    case Kind::floating:
      return Text::markup(js_number(v.as_number()));
    case Kind::boolean:
      return Text::markup(v.as_bool() ? "true" : "false");
    case Kind::array:
    case Kind::tuple: {
      // JavaScript's Array.prototype.toString over runtime value objects.
      std::string s;
      for (std::size_t i = 0; i < v.items().size(); ++i)
        s += i == 0 ? "[object Object]" : ",[object Object]";
      return Text::markup(std::move(s));
    }
    case Kind::object:
    case Kind::name_space:
    case Kind::kwargs:
      return Text::markup("[object Map]");
    default:
      in.error("cannot join a " + std::string(kind_name(v.kind())) + " into a string");
  }
}

bool strict_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_number() == b.as_number();
  if (a.kind() != b.kind()) {
    const bool arrays = a.is_array_like() && b.is_array_like();
    const bool objects = a.is_object_like() && b.is_object_like();
    if (!arrays && !objects) return false;
  }
  switch (a.kind()) {
    case Kind::undefined:
    case Kind::none:
      return true;
    case Kind::boolean:
      return a.as_bool() == b.as_bool();
    case Kind::string:
      return a.text().bytes == b.text().bytes;
    default:
      return a.identity() == b.identity();
  }
}

bool loose_equal(const Value& a, const Value& b) {
  if (a.is_nullish() || b.is_nullish()) return a.is_nullish() && b.is_nullish();
  const bool a_num = a.is_number() || a.is(Kind::boolean);
  const bool b_num = b.is_number() || b.is(Kind::boolean);
  if (a_num && b_num) return a.as_number() == b.as_number();
  if ((a_num && b.is(Kind::string)) || (b_num && a.is(Kind::string))) {
    const Value& s = a.is(Kind::string) ? a : b;
    const Value& n = a.is(Kind::string) ? b : a;
    const auto parsed = js_string_to_number(s.text().bytes);
    return parsed && *parsed == n.as_number();
  }
  return strict_equal(a, b);
}

bool has_test(std::string_view name) {
  for (std::string_view t : {"boolean", "callable", "odd", "even", "false", "true", "none",
                             "string", "number", "integer", "iterable", "mapping", "sequence",
                             "lower", "upper", "defined", "undefined", "equalto", "eq"}) {
    if (t == name) return true;
  }
  return false;
}

bool apply_test(Interpreter& in, const std::string& name, const Value& v, const Value* arg) {
  if (name == "boolean") return v.is(Kind::boolean);
  if (name == "callable") return v.is(Kind::function);
  if (name == "odd" || name == "even") {
    if (!v.is(Kind::integer))
      in.error("'is " + name + "' needs an integer, not " + std::string(kind_name(v.kind())));
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "false") return v.is(Kind::boolean) && !v.as_bool();
  if (name == "true") return v.is(Kind::boolean) && v.as_bool();
  if (name == "none") return v.is(Kind::none);
  if (name == "string") return v.is(Kind::string);
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is(Kind::integer);
  if (name == "iterable") return v.is(Kind::array) || v.is(Kind::string);
  if (name == "mapping") return v.is_object_like();
  if (name == "sequence") return v.is_array_like() || v.is_object_like() || v.is(Kind::string);
  if (name == "lower") return v.is(Kind::string) && v.text().bytes == ascii_lower(v.text().bytes);
  if (name == "upper") return v.is(Kind::string) && v.text().bytes == ascii_upper(v.text().bytes);
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "equalto" || name == "eq")
    return arg != nullptr ? strict_equal(v, *arg) : v.is_undefined();
  in.error("unsupported test 'is " + name + "'");
}

namespace {

Value range_fn(Interpreter& in, CallArgs& args) {
  if (args.positional.empty() || args.positional.size() > 3)
    in.error("range() takes 1 to 3 integers");
  for (const Value& v : args.positional) {
    if (!v.is(Kind::integer)) in.error("range() takes integers");
  }
  std::int64_t start = 0, stop = 0, step = 1;
  if (args.positional.size() == 1) {
    stop = args.positional[0].as_int();
  } else {
    start = args.positional[0].as_int();
    stop = args.positional[1].as_int();
    if (args.positional.size() == 3) step = args.positional[2].as_int();
  }
  if (step == 0) in.error("range() step must not be zero");
  Array out;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    in.charge(1);
    out.push_back(Value::integer(i));
    if (step > 0 ? i > INT64_MAX - step : i < INT64_MIN - step) break;
  }
  return Value::array(std::move(out));
}

Value namespace_fn(Interpreter& in, CallArgs& args) {
  if (args.positional.size() > 1) in.error("namespace() takes at most one positional argument");
  Object o;
  if (args.positional.size() == 1) {
    const Value& src = args.positional[0];
    if (src.is_object_like()) {
      for (const auto& [k, v] : src.fields().entries) o.set(k, v);
    } else if (src.is_array_like()) {
      for (const Value& pair : src.items()) {
        if (!pair.is_array_like() || pair.items().size() != 2 ||
            !pair.items()[0].is(Kind::string)) {
          in.error("namespace() takes a dict or a list of [key, value] pairs");
        }
        o.set(pair.items()[0].text().bytes, pair.items()[1]);
      }
    } else {
      in.error("namespace() takes a dict or a list of pairs, not " +
               std::string(kind_name(src.kind())));
    }
  }
  for (const auto& [k, v] : args.kwargs.entries) o.set(k, v);
  return Value::name_space(std::move(o));
}

}  // namespace

void install_globals(Object& g) {
  g.set("false", Value::boolean(false));
  g.set("true", Value::boolean(true));
  g.set("none", Value::none());
  g.set("False", Value::boolean(false));
  g.set("True", Value::boolean(true));
  g.set("None", Value::none());
  g.set("namespace", Value::function(namespace_fn));
  g.set("range", Value::function(range_fn));
  g.set("raise_exception", Value::function([](Interpreter& in, CallArgs& args) -> Value {
          std::string message = "the template raised an exception";
          if (!args.positional.empty() && args.positional[0].is(Kind::string)) {
            message += ": " + args.positional[0].text().bytes;
          }
          in.error(message);
        }));
}

}  // namespace pensieve::text::jinja
