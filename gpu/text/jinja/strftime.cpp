#include "gpu/text/jinja/strftime.hpp"

#include "gpu/text/jinja/interpreter.hpp"

#include <array>

namespace pensieve::text::jinja {

namespace {

constexpr std::array<std::string_view, 12> month_names = {
    "January", "February", "March",     "April",   "May",      "June",
    "July",    "August",   "September", "October", "November", "December"};

std::string two_digits(int n) {
  return n < 10 ? "0" + std::to_string(n) : std::to_string(n);
}

}  // namespace

std::string format_time(std::string_view format, const std::tm& t) {
  std::string out;
  const int month = t.tm_mon >= 0 && t.tm_mon < 12 ? t.tm_mon : 0;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 == format.size()) {
      out += format[i];
      continue;
    }
    const char d = format[i + 1];
    switch (d) {
      case 'Y':
        out += std::to_string(t.tm_year + 1900);
        break;
      case 'm':
        out += two_digits(t.tm_mon + 1);
        break;
      case 'd':
        out += two_digits(t.tm_mday);
        break;
      case 'b':
        out += month_names[std::size_t(month)].substr(0, 3);
        break;
      case 'B':
        out += month_names[std::size_t(month)];
        break;
      case 'H':
        out += two_digits(t.tm_hour);
        break;
      case 'M':
        out += two_digits(t.tm_min);
        break;
      case '%':
        out += '%';
        break;
      default:
        out += '%';
        out += d;
    }
    ++i;
  }
  return out;
}

Value strftime_now_at(const std::tm& t) {
  return Value::function([t](Interpreter& in, CallArgs& args) {
    if (args.positional.empty() || !args.positional[0].is(Kind::string))
      in.error("strftime_now() takes a format string");
    return Value::markup(format_time(args.positional[0].text().bytes, t));
  });
}

}  // namespace pensieve::text::jinja
