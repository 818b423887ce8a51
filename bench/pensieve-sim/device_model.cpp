#include "bench/pensieve-sim/device_model.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace pensieve::sim {

namespace json = boost::json;

namespace {

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail("cannot read '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

Result<DeviceModel> parse_device_model(const std::string& text, const std::string& source) {
  boost::system::error_code ec;
  const json::value root = json::parse(text, ec);
  if (ec) return fail(source + ": not JSON (" + ec.message() + ")");
  if (!root.is_object()) return fail(source + ": a device file is a JSON object");
  DeviceModel d;
  d.file = source;
  const std::map<std::string, double*> numbers = {
      {"memory_gb", &d.memory_gb},
      {"memory_utilization", &d.memory_utilization},
      {"activation_reserve_gb", &d.activation_reserve_gb},
      {"kv_budget_gb", &d.kv_budget_gb},
      {"tensor_tflops", &d.tensor_tflops},
      {"tensor_efficiency", &d.tensor_efficiency},
      {"hbm_gbps", &d.hbm_gbps},
      {"hbm_efficiency", &d.hbm_efficiency},
      {"iteration_overhead_us", &d.iteration_overhead_us},
      {"turn_start_us", &d.turn_start_us},
      {"compute_memory_overlap", &d.compute_memory_overlap},
      {"pcie_h2d_gbps", &d.pcie_h2d_gbps},
      {"pcie_d2h_gbps", &d.pcie_d2h_gbps},
      {"pcie_duplex_loss", &d.pcie_duplex_loss},
      {"disk_read_gbps", &d.disk_read_gbps},
      {"disk_write_gbps", &d.disk_write_gbps},
      {"interconnect_gbps", &d.interconnect_gbps},
      {"allreduce_latency_us", &d.allreduce_latency_us},
  };
  for (const auto& [key, value] : root.as_object()) {
    if (key == "name") {
      if (!value.is_string()) return fail(source + ": 'name' must be a string");
      d.name = std::string(value.as_string());
    } else if (key == "sources") {
      if (!value.is_array()) return fail(source + ": 'sources' must be a list of strings");
      for (const auto& s : value.as_array()) {
        if (!s.is_string()) return fail(source + ": 'sources' must be a list of strings");
        d.sources.emplace_back(s.as_string());
      }
    } else if (key == "notes") {
      continue;  // free text for the reader
    } else if (auto it = numbers.find(std::string(key)); it != numbers.end()) {
      if (!value.is_number()) return fail(source + ": '" + std::string(key) + "' must be a number");
      const double v = value.to_number<double>();
      if (!(v >= 0.0)) return fail(source + ": '" + std::string(key) + "' must not be negative");
      *it->second = v;
    } else {
      return fail(source + ": unknown key '" + std::string(key) + "'");
    }
  }
  if (d.name.empty()) return fail(source + ": a device needs a 'name'");
  if (d.tensor_tflops <= 0 || d.hbm_gbps <= 0 || d.tensor_efficiency <= 0 || d.hbm_efficiency <= 0)
    return fail(source + ": tensor_tflops, hbm_gbps and their efficiencies must be positive");
  if (d.pcie_duplex_loss >= 1.0) return fail(source + ": pcie_duplex_loss must be below 1");
  if (d.compute_memory_overlap > 1.0) return fail(source + ": compute_memory_overlap must be in [0, 1]");
  return d;
}

std::vector<std::string> device_presets() { return {"a100-80gb", "h100", "h200", "cpu"}; }

Result<DeviceModel> load_device_model(const std::string& name_or_path) {
  std::string path = name_or_path;
  for (const auto& p : device_presets()) {
    if (p == name_or_path) path = std::string(PENSIEVE_SIM_DEVICES_DIR) + "/" + p + ".json";
  }
  auto text = read_text(path);
  if (!text) return fail("--device " + name_or_path + ": " + text.error().message);
  return parse_device_model(*text, path);
}

}  // namespace pensieve::sim
