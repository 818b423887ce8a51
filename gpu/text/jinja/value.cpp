#include "gpu/text/jinja/value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace pensieve::text::jinja {

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::set(std::string key, Value v) {
  for (auto& [k, old] : entries) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(v));
}

bool Object::erase(std::string_view key) {
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if (it->first == key) {
      entries.erase(it);
      return true;
    }
  }
  return false;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::none;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::boolean;
  v.b_ = b;
  return v;
}
Value Value::integer(std::int64_t i) {
  Value v;
  v.kind_ = Kind::integer;
  v.i_ = i;
  return v;
}
Value Value::floating(double f) {
  Value v;
  v.kind_ = Kind::floating;
  v.f_ = f;
  return v;
}
Value Value::string(Text t) {
  Value v;
  v.kind_ = Kind::string;
  v.s_ = std::make_shared<const Text>(std::move(t));
  return v;
}
Value Value::array(Array items) {
  Value v;
  v.kind_ = Kind::array;
  v.a_ = std::make_shared<Array>(std::move(items));
  return v;
}
Value Value::tuple(Array items) {
  Value v = array(std::move(items));
  v.kind_ = Kind::tuple;
  return v;
}
Value Value::object(Object o) {
  Value v;
  v.kind_ = Kind::object;
  v.o_ = std::make_shared<Object>(std::move(o));
  return v;
}
Value Value::name_space(Object o) {
  Value v = object(std::move(o));
  v.kind_ = Kind::name_space;
  return v;
}
Value Value::kwargs(Object o) {
  Value v = object(std::move(o));
  v.kind_ = Kind::kwargs;
  return v;
}
Value Value::function(NativeFunction f) {
  Value v;
  v.kind_ = Kind::function;
  v.fn_ = std::make_shared<const NativeFunction>(std::move(f));
  return v;
}

const void* Value::identity() const {
  if (a_) return a_.get();
  if (o_) return o_.get();
  if (fn_) return fn_.get();
  return nullptr;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::undefined:
    case Kind::none:
      return false;
    case Kind::boolean:
      return b_;
    case Kind::integer:
      return i_ != 0;
    case Kind::floating:
      return f_ != 0 && !std::isnan(f_);
    case Kind::string:
      return !s_->bytes.empty();
    case Kind::array:
    case Kind::tuple:
      return !a_->empty();
    case Kind::object:
    case Kind::kwargs:
      return !o_->entries.empty();
    case Kind::name_space:
    case Kind::function:
      return true;
  }
  return false;
}

std::string_view kind_name(Kind k) {
  switch (k) {
    case Kind::undefined:
      return "undefined";
    case Kind::none:
      return "none";
    case Kind::boolean:
      return "boolean";
    case Kind::integer:
      return "integer";
    case Kind::floating:
      return "float";
    case Kind::string:
      return "string";
    case Kind::array:
      return "array";
    case Kind::tuple:
      return "tuple";
    case Kind::object:
      return "object";
    case Kind::name_space:
      return "namespace";
    case Kind::kwargs:
      return "keyword arguments";
    case Kind::function:
      return "function";
  }
  return "?";
}

std::string js_number(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  if (d == 0) return "0";
  if (std::abs(d) < 1e21 && d == std::trunc(d)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", d);
    return buf;
  }
  // Shortest round-trip digits, laid out as ECMAScript Number::toString does.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const std::size_t e_at = sci.find('e');
  std::string digits = sci.substr(0, e_at);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp10 = std::stoi(sci.substr(e_at + 1));
  const int k = int(digits.size());
  const int n = exp10 + 1;
  std::string out;
  if (k <= n && n <= 21) {
    out = digits + std::string(std::size_t(n - k), '0');
  } else if (0 < n && n <= 21) {
    out = digits.substr(0, std::size_t(n)) + "." + digits.substr(std::size_t(n));
  } else if (-6 < n && n <= 0) {
    out = "0." + std::string(std::size_t(-n), '0') + digits;
  } else {
    out = digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += (n - 1 >= 0 ? "e+" : "e-") + std::to_string(std::abs(n - 1));
  }
  return negative ? "-" + out : out;
}

}  // namespace pensieve::text::jinja
