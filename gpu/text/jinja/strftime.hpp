#pragma once
// strftime_now(format), the clock templates read for "Today Date: ..."
// (Llama 3.x, Granite), with @huggingface/jinja's directives: %Y %m %d %b %B
// %H %M %% (others are left as written); months in English.
#include "gpu/text/jinja/value.hpp"

#include <ctime>
#include <string>
#include <string_view>

namespace pensieve::text::jinja {

std::string format_time(std::string_view format, const std::tm& t);

// A strftime_now bound to one moment, so a render is a function of its input.
Value strftime_now_at(const std::tm& t);

}  // namespace pensieve::text::jinja
