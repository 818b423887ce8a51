#include "gpu/kernels/decode_plan_table.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace pensieve::kernels {

namespace json = boost::json;

namespace {

Result<double> positive_number(const json::value& v, std::string_view key) {
  if (!v.is_number()) return fail("decode plan table: '" + std::string(key) + "' must be a number");
  const double d = v.to_number<double>();
  if (!(d > 0.0) || d > 1e9) return fail("decode plan table: '" + std::string(key) + "' must be positive");
  return d;
}

}  // namespace

Result<DecodePlanTable> parse_decode_plan_table(std::string_view text) {
  boost::system::error_code ec;
  const json::value root = json::parse(text, ec);
  if (ec) return fail("decode plan table: not JSON (" + ec.message() + ")");
  if (!root.is_object()) return fail("decode plan table: the top level must be an object");
  DecodePlanTable table;
  DecodePlanThresholds& t = table.thresholds;
  for (const auto& [key, value] : root.as_object()) {
    if (key == "device") {
      if (!value.is_string()) return fail("decode plan table: 'device' must be a string");
      table.device = std::string(value.as_string());
      continue;
    }
    if (key == "source" || key == "measured") continue;  // provenance, free-form
    auto d = positive_number(value, key);
    if (!d) return d.error();
    if (key == "min_items_per_worker") {
      t.min_items_per_worker = *d;
    } else if (key == "split_min_context_tokens") {
      if (*d != double(std::int32_t(*d))) return fail("decode plan table: 'split_min_context_tokens' must be an integer");
      t.split_min_context_tokens = std::int32_t(*d);
    } else if (key == "packed_imbalance_ratio") {
      if (*d < 1.0) return fail("decode plan table: 'packed_imbalance_ratio' must be at least 1");
      t.packed_imbalance_ratio = *d;
    } else if (key == "target_items_per_worker") {
      t.target_items_per_worker = *d;
    } else {
      return fail("decode plan table: unknown key '" + std::string(key) + "'");
    }
  }
  return table;
}

Result<DecodePlanTable> load_decode_plan_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail("--decode-plan: cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  auto table = parse_decode_plan_table(text.str());
  if (!table) return fail("--decode-plan " + path + ": " + table.error().message);
  return table;
}

std::string describe(const DecodePlanThresholds& t) {
  char line[200];
  std::snprintf(line, sizeof line,
                "min_items_per_worker=%g split_min_context_tokens=%d packed_imbalance_ratio=%g "
                "target_items_per_worker=%g",
                t.min_items_per_worker, t.split_min_context_tokens, t.packed_imbalance_ratio,
                t.target_items_per_worker);
  return line;
}

}  // namespace pensieve::kernels
