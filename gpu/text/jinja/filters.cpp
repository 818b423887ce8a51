// The filters (x | name, x | name(args)), as @huggingface/jinja applies them:
// which filters exist depends on the operand's type.
#include "gpu/text/jinja/interpreter.hpp"
#include "gpu/text/jinja/strings.hpp"

#include <cmath>
#include <set>

namespace pensieve::text::jinja {

namespace {

[[noreturn]] void unknown(Interpreter& in, const std::string& name, const Value& v) {
  in.error("unsupported filter '" + name + "' for a " + std::string(kind_name(v.kind())));
}

// What Array.prototype.join writes for one element's raw value.
Text join_piece(Interpreter& in, const Value& v) {
  if (v.is_nullish()) return {};
  return to_concat(in, v);
}

Value join(Interpreter& in, const Value& v, const Text& sep) {
  Text out;
  if (v.is(Kind::string)) {
    const std::string& s = v.text().bytes;
    bool first = true;
    for (std::size_t i = 0; i < s.size();) {
      std::size_t len = 1;
      decode_utf8(s, i, len);
      if (!first) out.append(sep);
      out.append(v.text().substr(i, len));
      first = false;
      i += len;
      in.check_size(out.bytes.size());
    }
    return Value::string(std::move(out));
  }
  const Array& items = v.items();
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out.append(sep);
    out.append(join_piece(in, items[i]));
    in.check_size(out.bytes.size());
  }
  in.charge(std::int64_t(items.size()));
  return Value::string(std::move(out));
}

Value indent(Interpreter& in, const Text& t, std::int64_t width, bool first, bool blank) {
  if (width < 0 || width > 4096) in.error("indent width out of range");
  const std::string pad(std::size_t(width), ' ');
  Text out;
  std::size_t at = 0;
  bool first_line = true;
  while (true) {
    const std::size_t nl = t.bytes.find('\n', at);
    const std::size_t end = nl == std::string::npos ? t.bytes.size() : nl;
    const bool empty = end == at;
    if (!((!first && first_line) || (!blank && empty))) out.append_markup(pad);
    out.append(t.substr(at, end - at));
    if (nl == std::string::npos) break;
    out.append(t.substr(nl, 1));
    at = nl + 1;
    first_line = false;
    in.check_size(out.bytes.size());
  }
  return Value::string(std::move(out));
}

Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  std::size_t at = 0;
  while (true) {
    const std::size_t dot = path.find('.', at);
    const std::string part =
        path.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
    if (v.is_object_like() || v.is(Kind::name_space)) {
      const Value* x = v.fields().find(part);
      v = x != nullptr ? *x : Value();
    } else if (v.is_array_like()) {
      const auto idx = js_parse_int(part);
      if (!idx || *idx < 0 || *idx >= double(v.items().size())) return Value();
      v = v.items()[std::size_t(*idx)];
    } else {
      return Value();
    }
    if (dot == std::string::npos) return v;
    at = dot + 1;
  }
}

Value sort(Interpreter& in, const Value& v, bool reverse, bool case_sensitive,
           const Value* attribute) {
  Array items = v.items();
  in.charge(std::int64_t(items.size()));
  auto key = [&](const Value& item) {
    if (attribute == nullptr || attribute->is(Kind::none)) return item;
    const std::string path = attribute->is(Kind::integer) ? std::to_string(attribute->as_int())
                                                          : attribute->text().bytes;
    return attribute_path(item, path);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int c = compare_values(in, key(a), key(b), case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return Value::array(std::move(items));
}

Value select_attr(Interpreter& in, const Value& v, bool select, CallArgs& args,
                  const std::vector<NodePtr>& raw, const std::string& name) {
  for (const Value& item : v.items()) {
    if (!item.is_object_like() && !item.is(Kind::name_space))
      in.error(name + " can only filter a list of dicts");
  }
  for (const auto& a : raw) {
    if (a->kind != NodeKind::literal || !a->value.is(Kind::string))
      in.error("the arguments of " + name + " must be strings");
  }
  if (args.positional.empty()) in.error(name + " needs an attribute name");
  const std::string attr = args.positional[0].text().bytes;
  const std::string test = args.positional.size() > 1 ? args.positional[1].text().bytes : "";
  if (!test.empty() && !has_test(test)) in.error("unsupported test '" + test + "' in " + name);
  const Value* arg = args.positional.size() > 2 ? &args.positional[2] : nullptr;
  Array out;
  for (const Value& item : v.items()) {
    const Value* a = item.fields().find(attr);
    bool r = false;
    if (a != nullptr) r = test.empty() ? a->truthy() : apply_test(in, test, *a, arg);
    if (r == select) out.push_back(item);
  }
  in.charge(std::int64_t(v.items().size()));
  return Value::array(std::move(out));
}

Value map_attr(Interpreter& in, const Value& v, CallArgs& args) {
  const Value* attr = args.kwarg("attribute");
  if (attr == nullptr) in.error("map() is supported only with attribute=");
  if (!attr->is(Kind::string)) in.error("map(attribute=) takes a string");
  const Value* dflt = args.kwarg("default");
  Array out;
  for (const Value& item : v.items()) {
    if (!item.is_object_like() && !item.is(Kind::name_space))
      in.error("map(attribute=) needs a list of dicts");
    Value x = attribute_path(item, attr->text().bytes);
    out.push_back(x.is_undefined() && dflt != nullptr ? *dflt : x);
  }
  in.charge(std::int64_t(v.items().size()));
  return Value::array(std::move(out));
}

Value unique(const Value& v) {
  Array out;
  for (const Value& item : v.items()) {
    bool seen = false;
    for (const Value& o : out) {
      if (strict_equal(o, item)) {
        seen = true;
        break;
      }
    }
    if (!seen) out.push_back(item);
  }
  return Value::array(std::move(out));
}

Value trim(const Text& t) {
  const std::size_t pre = js_space_prefix(t.bytes);
  if (pre >= t.bytes.size()) return Value::string(t.substr(0, 0));
  const std::size_t post = js_space_suffix(t.bytes);
  return Value::string(t.substr(pre, t.bytes.size() - pre - post));
}

Value plain_filter(Interpreter& in, const Value& v, const std::string& name) {
  if (name == "safe") return v;
  if (name == "tojson") return Value::string(to_json(in, v, {}));
  if (v.is_array_like()) {
    const Array& items = v.items();
    if (name == "list") return v;
    if (name == "first") return items.empty() ? Value() : items.front();
    if (name == "last") return items.empty() ? Value() : items.back();
    if (name == "length") return Value::integer(std::int64_t(items.size()));
    if (name == "reverse") return Value::array(Array(items.rbegin(), items.rend()));
    if (name == "sort") return sort(in, v, false, false, nullptr);
    if (name == "join") return join(in, v, {});
    if (name == "string") {
      JsonStyle style;
      style.undefined_as_null = false;
      return Value::string(to_json(in, v, style));
    }
    if (name == "unique") return unique(v);
    unknown(in, name, v);
  }
  if (v.is(Kind::string)) {
    const Text& t = v.text();
    if (name == "length" || name == "upper" || name == "lower" || name == "title" ||
        name == "capitalize") {
      const Value m = member_of(in, v, Value::markup(name));
      if (m.is(Kind::integer)) return m;
      CallArgs none;
      return in.call(m, none, in.scope());
    }
    if (name == "trim") return trim(t);
    if (name == "indent") return indent(in, t, 4, false, false);
    if (name == "join" || name == "string") return v;
    if (name == "int") return Value::integer(std::int64_t(js_parse_int(t.bytes).value_or(0)));
    if (name == "float") return Value::floating(js_parse_float(t.bytes).value_or(0));
    unknown(in, name, v);
  }
  if (v.is_number()) {
    if (name == "abs")
      return v.is(Kind::integer) ? Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int())
                                 : Value::floating(std::abs(v.as_number()));
    if (name == "int")
      return v.is(Kind::integer) ? v : Value::integer(std::int64_t(std::floor(v.as_number())));
    if (name == "float") return Value::floating(v.as_number());
    if (name == "string") return Value::string(to_output(in, v));
    unknown(in, name, v);
  }
  if (v.is_object_like()) {
    if (name == "items" || name == "length") {
      if (name == "length") return Value::integer(std::int64_t(v.fields().entries.size()));
    }
    const Value m = dict_builtin(v, name);
    if (m.is(Kind::function)) {
      CallArgs none;
      return in.call(m, none, in.scope());
    }
    unknown(in, name, v);
  }
  if (v.is(Kind::boolean)) {
    if (name == "bool") return v;
    if (name == "int") return Value::integer(v.as_bool() ? 1 : 0);
    if (name == "float") return Value::floating(v.as_bool() ? 1 : 0);
    if (name == "string") return Value::markup(v.as_bool() ? "true" : "false");
    unknown(in, name, v);
  }
  unknown(in, name, v);
}

bool flag(Interpreter& in, const Value* v, const char* what) {
  if (v == nullptr) return false;
  if (!v->is(Kind::boolean)) in.error(std::string(what) + " must be a boolean");
  return v->as_bool();
}

Value tojson_call(Interpreter& in, const Value& v, CallArgs& args) {
  JsonStyle style;
  if (const Value* ind = args.kwarg("indent"); ind != nullptr && !ind->is(Kind::none)) {
    if (!ind->is(Kind::integer)) in.error("tojson: indent must be an integer");
    if (ind->as_int() < 0 || ind->as_int() > 64) in.error("tojson: indent out of range");
    style.indent = int(ind->as_int());
  }
  style.ensure_ascii = flag(in, args.kwarg("ensure_ascii"), "tojson: ensure_ascii");
  style.sort_keys = flag(in, args.kwarg("sort_keys"), "tojson: sort_keys");
  if (const Value* sep = args.kwarg("separators"); sep != nullptr && !sep->is(Kind::none)) {
    if (!sep->is_array_like() || sep->items().size() != 2 || !sep->items()[0].is(Kind::string) ||
        !sep->items()[1].is(Kind::string)) {
      in.error("tojson: separators must be a tuple of two strings");
    }
    style.item_separator = sep->items()[0].text().bytes;
    style.key_separator = sep->items()[1].text().bytes;
    if (style.item_separator.empty() || style.key_separator.empty())
      in.error("tojson: empty separators are unsupported");
  }
  return Value::string(to_json(in, v, style));
}

}  // namespace

Value apply_filter(Interpreter& in, const Value& v, const std::string& name, CallArgs* args,
                   const std::vector<NodePtr>* raw) {
  if (args == nullptr) return plain_filter(in, v, name);
  if (name == "tojson") return tojson_call(in, v, *args);
  if (name == "join") {
    if (!v.is(Kind::string) && !v.is_array_like()) unknown(in, name, v);
    const Value* sep = args->get(0, "separator");
    if (sep != nullptr && !sep->is(Kind::string)) in.error("join: the separator must be a string");
    return join(in, v, sep != nullptr ? sep->text() : Text{});
  }
  if (name == "int" || name == "float") {
    const Value* d = args->get(0, "default");
    const Value dflt = d != nullptr ? *d : name == "int" ? Value::integer(0) : Value::floating(0);
    if (v.is(Kind::string)) {
      const auto parsed =
          name == "int" ? js_parse_int(v.text().bytes) : js_parse_float(v.text().bytes);
      if (!parsed) return dflt;
      return name == "int" ? Value::integer(std::int64_t(*parsed)) : Value::floating(*parsed);
    }
    if (v.is_number()) return v;
    if (v.is(Kind::boolean))
      return name == "int" ? Value::integer(v.as_bool()) : Value::floating(v.as_bool());
    unknown(in, name, v);
  }
  if (name == "default") {
    const Value dflt = !args->positional.empty() ? args->positional[0] : Value::markup("");
    const bool boolean = flag(in, args->get(1, "boolean"), "default: boolean");
    if (v.is_undefined() || (boolean && !v.truthy())) return dflt;
    return v;
  }
  if (v.is_array_like()) {
    if (name == "sort") {
      const Value* attr = args->get(2, "attribute");
      if (attr != nullptr && !attr->is(Kind::string) && !attr->is(Kind::integer) &&
          !attr->is(Kind::none)) {
        in.error("sort: attribute must be a string or an integer");
      }
      return sort(in, v, flag(in, args->get(0, "reverse"), "sort: reverse"),
                  flag(in, args->get(1, "case_sensitive"), "sort: case_sensitive"), attr);
    }
    if (name == "selectattr" || name == "rejectattr") {
      return select_attr(in, v, name == "selectattr", *args, *raw, name);
    }
    if (name == "map") return map_attr(in, v, *args);
    unknown(in, name, v);
  }
  if (v.is(Kind::string)) {
    if (name == "indent") {
      const Value* w = args->get(0, "width");
      if (w != nullptr && !w->is(Kind::integer)) in.error("indent: width must be an integer");
      const Value* first = args->get(1, "first");
      const Value* blank = args->get(2, "blank");
      return indent(in, v.text(), w != nullptr ? w->as_int() : 4,
                    first != nullptr && first->truthy(), blank != nullptr && blank->truthy());
    }
    if (name == "replace") return replace_text(in, v.text(), *args);
    unknown(in, name, v);
  }
  if (v.is_object_like()) {
    const Value m = dict_builtin(v, name);
    if (m.is(Kind::function)) return in.call(m, *args, in.scope());
    unknown(in, name, v);
  }
  unknown(in, name, v);
}

}  // namespace pensieve::text::jinja
