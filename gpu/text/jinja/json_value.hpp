#pragma once
// JSON (a request's messages and tools, a test's conversation) to template
// values. Strings and keys are marked as client text when `client` is set.
// Integral numbers become integers, as JavaScript's JSON.parse makes them.
#include "gpu/text/jinja/value.hpp"

#include <boost/json/value.hpp>

namespace pensieve::text::jinja {

Value from_json(const boost::json::value& v, bool client);

}  // namespace pensieve::text::jinja
