#include "gpu/text/jinja/json_value.hpp"

#include <cmath>

namespace pensieve::text::jinja {

Value from_json(const boost::json::value& v, bool client) {
  switch (v.kind()) {
    case boost::json::kind::null:
      return Value::none();
    case boost::json::kind::bool_:
      return Value::boolean(v.get_bool());
    case boost::json::kind::int64:
      return Value::integer(v.get_int64());
    case boost::json::kind::uint64:
      return Value::floating(double(v.get_uint64()));
    case boost::json::kind::double_: {
      const double d = v.get_double();
      if (d == std::trunc(d) && std::abs(d) < 9.007199254740992e15)
        return Value::integer(std::int64_t(d));
      return Value::floating(d);
    }
    case boost::json::kind::string: {
      std::string s(v.get_string());
      return client ? Value::client(std::move(s)) : Value::markup(std::move(s));
    }
    case boost::json::kind::array: {
      Array items;
      for (const auto& x : v.get_array()) items.push_back(from_json(x, client));
      return Value::array(std::move(items));
    }
    case boost::json::kind::object: {
      Object o;
      o.client_keys = client;
      for (const auto& [k, x] : v.get_object()) o.set(std::string(k), from_json(x, client));
      return Value::object(std::move(o));
    }
  }
  return Value();
}

}  // namespace pensieve::text::jinja
