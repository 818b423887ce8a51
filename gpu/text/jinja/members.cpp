// Member access: dict keys and dict methods, list and string indices, and the
// string methods chat templates call (strip, split, startswith, ...), as
// @huggingface/jinja's builtins.
#include "gpu/text/jinja/interpreter.hpp"
#include "gpu/text/jinja/strings.hpp"

namespace pensieve::text::jinja {

namespace {

Value key_value(const Object& o, const std::string& k) {
  return o.client_keys ? Value::client(k) : Value::markup(k);
}

Value items_of(const Value& obj) {
  Array out;
  for (const auto& [k, v] : obj.fields().entries)
    out.push_back(Value::array({key_value(obj.fields(), k), v}));
  return Value::array(std::move(out));
}

Value trim_text(const Text& t, bool left, bool right) {
  const std::size_t pre = left ? js_space_prefix(t.bytes) : 0;
  const std::size_t post = right && pre < t.bytes.size() ? js_space_suffix(t.bytes) : 0;
  if (pre >= t.bytes.size()) return Value::string(t.substr(0, 0));
  return Value::string(t.substr(pre, t.bytes.size() - pre - post));
}

bool affix_test(Interpreter& in, const Text& t, CallArgs& args, bool prefix, const char* name) {
  if (args.positional.empty()) in.error(std::string(name) + "() needs an argument");
  auto test = [&](const Value& p) {
    if (!p.is(Kind::string))
      in.error(std::string(name) + "() takes a string or a tuple of strings");
    const std::string& a = p.text().bytes;
    const std::string& s = t.bytes;
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0
                  : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  const Value& p = args.positional[0];
  if (p.is_array_like()) {
    for (const Value& x : p.items()) {
      if (test(x)) return true;
    }
    return false;
  }
  return test(p);
}

Value split_text(Interpreter& in, const Text& t, CallArgs& args) {
  const Value sep = !args.positional.empty() ? args.positional[0] : Value::none();
  const Value maxv = args.positional.size() > 1 ? args.positional[1] : Value::integer(-1);
  if (!sep.is(Kind::string) && !sep.is(Kind::none))
    in.error("split() takes a string separator or none");
  if (!maxv.is(Kind::integer)) in.error("split() takes an integer maxsplit");
  const std::int64_t max_split = maxv.as_int();
  const std::string& s = t.bytes;
  Array out;
  if (sep.is(Kind::none)) {
    std::size_t i = js_space_prefix(s);
    while (i < s.size()) {
      if (max_split != -1 && std::int64_t(out.size()) >= max_split) {
        out.push_back(Value::string(t.substr(i, s.size() - i)));
        break;
      }
      std::size_t j = i;
      while (j < s.size()) {
        std::size_t len = 1;
        if (is_js_space(decode_utf8(s, j, len))) break;
        j += len;
      }
      out.push_back(Value::string(t.substr(i, j - i)));
      i = j + js_space_prefix(std::string_view(s).substr(j));
    }
    return Value::array(std::move(out));
  }
  const std::string& d = sep.text().bytes;
  if (d.empty()) in.error("split() got an empty separator");
  std::size_t at = 0;
  while (true) {
    in.charge(1);
    const bool limited = max_split != -1 && std::int64_t(out.size()) >= max_split;
    const std::size_t next = limited ? std::string::npos : s.find(d, at);
    if (next == std::string::npos) {
      out.push_back(Value::string(t.substr(at, s.size() - at)));
      break;
    }
    out.push_back(Value::string(t.substr(at, next - at)));
    at = next + d.size();
  }
  return Value::array(std::move(out));
}

}  // namespace

Value replace_text(Interpreter& in, const Text& t, CallArgs& args) {
  if (args.positional.size() < 2) in.error("replace() needs the old and the new string");
  const Value& from = args.positional[0];
  const Value& to = args.positional[1];
  if (!from.is(Kind::string) || !to.is(Kind::string)) in.error("replace() takes strings");
  const Value* count_v = args.positional.size() > 2 ? &args.positional[2] : args.kwarg("count");
  std::int64_t remaining = -1;
  if (count_v != nullptr && !count_v->is(Kind::none)) {
    if (!count_v->is(Kind::integer)) in.error("replace() count must be an integer");
    remaining = count_v->as_int();
  }
  if (remaining == 0) return Value::string(t);
  const std::string& s = t.bytes;
  const std::string& a = from.text().bytes;
  const std::string& b = to.text().bytes;
  std::string out;
  bool any_client = t.has_client();
  if (a.empty()) {
    // Between every code point, and at both ends.
    for (std::size_t i = 0; i <= s.size();) {
      if (remaining != 0) {
        out += b;
        if (remaining > 0) --remaining;
      }
      if (i == s.size()) break;
      std::size_t len = 1;
      decode_utf8(s, i, len);
      out.append(s, i, len);
      i += len;
      in.check_size(out.size());
    }
  } else {
    std::size_t at = 0;
    while (true) {
      const std::size_t next = remaining == 0 ? std::string::npos : s.find(a, at);
      if (next == std::string::npos) {
        out.append(s, at, std::string::npos);
        break;
      }
      out.append(s, at, next - at);
      out += b;
      if (remaining > 0) --remaining;
      at = next + a.size();
      in.check_size(out.size());
      in.charge(1);
    }
  }
  any_client = any_client || to.text().has_client();
  return any_client ? Value::client(std::move(out)) : Value::markup(std::move(out));
}

namespace {

Value string_method(Interpreter& in, const Value& str, const std::string& name) {
  const Text t = str.text();
  auto method = [](auto f) { return Value::function(std::move(f)); };
  if (name == "length") return Value::integer(std::int64_t(utf16_length(t.bytes)));
  if (name == "upper")
    return method(
        [t](Interpreter&, CallArgs&) { return Value::string(t.derived(ascii_upper(t.bytes))); });
  if (name == "lower")
    return method(
        [t](Interpreter&, CallArgs&) { return Value::string(t.derived(ascii_lower(t.bytes))); });
  if (name == "title")
    return method(
        [t](Interpreter&, CallArgs&) { return Value::string(t.derived(js_title(t.bytes))); });
  if (name == "capitalize") {
    return method([t](Interpreter&, CallArgs&) {
      std::string s = t.bytes;
      if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = char(s[0] - 'a' + 'A');
      return Value::string(t.derived(std::move(s)));
    });
  }
  if (name == "strip")
    return method([t](Interpreter&, CallArgs&) { return trim_text(t, true, true); });
  if (name == "lstrip")
    return method([t](Interpreter&, CallArgs&) { return trim_text(t, true, false); });
  if (name == "rstrip")
    return method([t](Interpreter&, CallArgs&) { return trim_text(t, false, true); });
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return method([t, prefix](Interpreter& i, CallArgs& a) {
      return Value::boolean(affix_test(i, t, a, prefix, prefix ? "startswith" : "endswith"));
    });
  }
  if (name == "split")
    return method([t](Interpreter& i, CallArgs& a) { return split_text(i, t, a); });
  if (name == "replace")
    return method([t](Interpreter& i, CallArgs& a) { return replace_text(i, t, a); });
  (void)in;
  return Value();
}

Value dictsort(Interpreter& in, const Value& obj, CallArgs& args) {
  const Value* cs = args.get(0, "case_sensitive");
  const Value* by = args.get(1, "by");
  const Value* rev = args.get(2, "reverse");
  if (cs != nullptr && !cs->is(Kind::boolean))
    in.error("dictsort: case_sensitive must be a boolean");
  if (by != nullptr &&
      (!by->is(Kind::string) || (by->text().bytes != "key" && by->text().bytes != "value"))) {
    in.error("dictsort: by must be 'key' or 'value'");
  }
  if (rev != nullptr && !rev->is(Kind::boolean)) in.error("dictsort: reverse must be a boolean");
  const bool case_sensitive = cs != nullptr && cs->as_bool();
  const std::size_t index = by != nullptr && by->text().bytes == "value" ? 1 : 0;
  const bool reverse = rev != nullptr && rev->as_bool();
  Array items = items_of(obj).items();
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int c = compare_values(in, a.items()[index], b.items()[index], case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return Value::array(std::move(items));
}

Value dict_method(const Value& obj, const std::string& name) {
  if (name == "get") {
    return Value::function([obj](Interpreter& in, CallArgs& args) {
      if (args.positional.empty() || !args.positional[0].is(Kind::string))
        in.error("get() takes a string key");
      if (const Value* v = obj.fields().find(args.positional[0].text().bytes)) return *v;
      if (args.positional.size() > 1) return args.positional[1];
      if (!args.kwargs.entries.empty()) return Value::kwargs(args.kwargs);
      return Value::none();
    });
  }
  if (name == "items")
    return Value::function([obj](Interpreter&, CallArgs&) { return items_of(obj); });
  if (name == "keys") {
    return Value::function([obj](Interpreter&, CallArgs&) {
      Array out;
      for (const auto& [k, v] : obj.fields().entries) out.push_back(key_value(obj.fields(), k));
      return Value::array(std::move(out));
    });
  }
  if (name == "values") {
    return Value::function([obj](Interpreter&, CallArgs&) {
      Array out;
      for (const auto& [k, v] : obj.fields().entries) out.push_back(v);
      return Value::array(std::move(out));
    });
  }
  if (name == "dictsort")
    return Value::function([obj](Interpreter& in, CallArgs& a) { return dictsort(in, obj, a); });
  return Value();
}

}  // namespace

int compare_values(Interpreter& in, const Value& a, const Value& b, bool case_sensitive) {
  if (a.is(Kind::none) && b.is(Kind::none)) return 0;
  if (a.is(Kind::undefined) && b.is(Kind::undefined)) return 0;
  if (a.is_nullish() || b.is_nullish()) in.error("cannot compare none or undefined values");
  const bool a_num = a.is_number() || a.is(Kind::boolean);
  const bool b_num = b.is_number() || b.is(Kind::boolean);
  if (a_num && b_num) {
    const double x = a.as_number(), y = b.as_number();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (!a.is(Kind::string) || !b.is(Kind::string)) {
    in.error("cannot compare " + std::string(kind_name(a.kind())) + " with " +
             std::string(kind_name(b.kind())));
  }
  const std::string x = case_sensitive ? a.text().bytes : ascii_lower(a.text().bytes);
  const std::string y = case_sensitive ? b.text().bytes : ascii_lower(b.text().bytes);
  return x < y ? -1 : x > y ? 1 : 0;
}

Value dict_builtin(const Value& obj, const std::string& name) {
  return dict_method(obj, name);
}

Value member_of(Interpreter& in, const Value& object, const Value& key) {
  if (object.is_object_like() || object.is(Kind::name_space)) {
    if (!key.is(Kind::string))
      in.error("a dict key must be a string, not " + std::string(kind_name(key.kind())));
    if (const Value* v = object.fields().find(key.text().bytes)) return *v;
    return object.is(Kind::name_space) ? Value() : dict_method(object, key.text().bytes);
  }
  if (object.is_array_like() || object.is(Kind::string)) {
    if (key.is(Kind::integer)) {
      if (object.is_array_like()) {
        const auto n = std::int64_t(object.items().size());
        const std::int64_t i = key.as_int() < 0 ? n + key.as_int() : key.as_int();
        return i >= 0 && i < n ? object.items()[std::size_t(i)] : Value();
      }
      // A code point of the string (JavaScript's at() counts UTF-16 units;
      // the two agree on the Basic Multilingual Plane).
      const Text& t = object.text();
      std::vector<std::size_t> starts;
      for (std::size_t i = 0; i < t.bytes.size(); ++i) {
        if ((static_cast<unsigned char>(t.bytes[i]) & 0xC0) != 0x80) starts.push_back(i);
      }
      const auto n = std::int64_t(starts.size());
      const std::int64_t i = key.as_int() < 0 ? n + key.as_int() : key.as_int();
      if (i < 0 || i >= n) return Value();
      const std::size_t b = starts[std::size_t(i)];
      const std::size_t e =
          std::size_t(i + 1) < starts.size() ? starts[std::size_t(i + 1)] : t.bytes.size();
      return Value::string(t.substr(b, e - b));
    }
    if (key.is(Kind::string)) {
      if (object.is(Kind::string)) return string_method(in, object, key.text().bytes);
      if (key.text().bytes == "length") return Value::integer(std::int64_t(object.items().size()));
      return Value();
    }
    in.error("a list or string index must be an integer, not " +
             std::string(kind_name(key.kind())));
  }
  if (!key.is(Kind::string)) in.error("a member name must be a string");
  return Value();
}

}  // namespace pensieve::text::jinja
