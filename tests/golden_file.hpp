#pragma once
// The golden files of ../shared/golden (one JSON object per line: the prompt
// ids, the reference implementation's greedy `generated` ids and, per
// generated step, its top logits as [id, logit] pairs), read for the tests
// that must reproduce them.
#include <boost/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace pensieve::testing {

struct GoldenLine {
  std::vector<std::int32_t> prompt, generated;
  std::vector<std::vector<std::pair<std::int32_t, double>>> top;  // per generated step
};

inline std::vector<GoldenLine> read_golden(const std::filesystem::path& path) {
  auto ids = [](const boost::json::value& v) {
    std::vector<std::int32_t> out;
    for (const auto& id : v.as_array()) out.push_back(std::int32_t(id.to_number<std::int64_t>()));
    return out;
  };
  std::ifstream in(path);
  std::vector<GoldenLine> lines;
  for (std::string text; std::getline(in, text);) {
    if (text.empty()) continue;
    const auto obj = boost::json::parse(text).as_object();
    GoldenLine g;
    g.prompt = ids(obj.at("prompt"));
    g.generated = ids(obj.at("generated"));
    if (const auto* steps = obj.if_contains("logits")) {
      for (const auto& step : steps->as_array()) {
        auto& row = g.top.emplace_back();
        for (const auto& pair : step.as_array()) {
          row.emplace_back(std::int32_t(pair.as_array()[0].to_number<std::int64_t>()),
                           pair.as_array()[1].to_number<double>());
        }
      }
    }
    lines.push_back(std::move(g));
  }
  return lines;
}

// The greedy choice: the first id of the largest logit.
inline std::int32_t argmax(std::span<const float> logits) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return std::int32_t(best);
}

}  // namespace pensieve::testing
