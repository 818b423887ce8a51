#pragma once
// The values a Jinja template computes with, shaped after @huggingface/jinja's
// runtime values (the reference we test against): undefined and none, bool,
// integer, float, string (Text, with provenance), array and tuple, object
// (insertion-ordered), namespace, keyword arguments, and callables. Arrays
// and objects are shared by reference, as in JavaScript, so `==` on them is
// identity. Plain data; used on one thread at a time.
#include "gpu/text/jinja/text.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pensieve::text::jinja {

enum class Kind {
  undefined,
  none,
  boolean,
  integer,
  floating,
  string,
  array,
  tuple,
  object,
  name_space,
  kwargs,
  function
};

class Value;
using Array = std::vector<Value>;

struct Object {
  std::vector<std::pair<std::string, Value>> entries;
  bool client_keys =
      false;  // the keys came from a client (tool schemas): print them as client text
  const Value* find(std::string_view key) const;
  void set(std::string key, Value v);
  bool erase(std::string_view key);
};

class Interpreter;
struct CallArgs;
using NativeFunction = std::function<Value(Interpreter&, CallArgs&)>;

class Value {
 public:
  Value() = default;
  static Value none();
  static Value boolean(bool b);
  static Value integer(std::int64_t i);
  static Value floating(double f);
  static Value string(Text t);
  static Value markup(std::string s) { return string(Text::markup(std::move(s))); }
  static Value client(std::string s) { return string(Text::from_client(std::move(s))); }
  static Value array(Array items = {});
  static Value tuple(Array items);
  static Value object(Object o = {});
  static Value name_space(Object o);
  static Value kwargs(Object o);
  static Value function(NativeFunction f);

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_nullish() const { return kind_ == Kind::undefined || kind_ == Kind::none; }
  bool is_array_like() const { return kind_ == Kind::array || kind_ == Kind::tuple; }
  bool is_object_like() const { return kind_ == Kind::object || kind_ == Kind::kwargs; }
  bool is_number() const { return kind_ == Kind::integer || kind_ == Kind::floating; }

  bool as_bool() const { return b_; }
  std::int64_t as_int() const { return i_; }
  double as_number() const {
    return kind_ == Kind::integer ? double(i_) : kind_ == Kind::boolean ? double(b_) : f_;
  }
  const Text& text() const { return *s_; }
  const Array& items() const { return *a_; }
  Array& items() { return *a_; }
  const Object& fields() const { return *o_; }
  Object& fields() { return *o_; }
  const NativeFunction& fn() const { return *fn_; }
  const void* identity() const;  // arrays, objects and functions: what == compares

  // Jinja truthiness as @huggingface/jinja's __bool__.
  bool truthy() const;

 private:
  Kind kind_ = Kind::undefined;
  bool b_ = false;
  std::int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const Text> s_;
  std::shared_ptr<Array> a_;
  std::shared_ptr<Object> o_;
  std::shared_ptr<const NativeFunction> fn_;
};

std::string_view kind_name(Kind k);

// The number as JavaScript's String(n) writes it (1, 0.5, 1e+21).
std::string js_number(double d);

}  // namespace pensieve::text::jinja
