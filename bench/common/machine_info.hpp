#pragma once
// What a benchmark result must say about the machine it ran on.
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace pensieve::bench {

struct MachineInfo {
  unsigned hardware_threads = 0;
  std::string cpu_model;
  // The vector and matrix extensions among /proc/cpuinfo's flags (sse4_2,
  // avx*, fma, f16c, amx*), space-separated: what the run-time kernel
  // choice saw.
  std::string vector_extensions;
};

inline MachineInfo machine_info() {
  MachineInfo info;
  info.hardware_threads = std::thread::hardware_concurrency();
  std::ifstream cpuinfo("/proc/cpuinfo");
  bool have_model = false, have_flags = false;
  for (std::string line; (!have_model || !have_flags) && std::getline(cpuinfo, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || colon + 2 > line.size()) continue;
    if (!have_model && line.rfind("model name", 0) == 0) {
      info.cpu_model = line.substr(colon + 2);
      have_model = true;
    } else if (!have_flags && line.rfind("flags", 0) == 0) {
      std::istringstream flags(line.substr(colon + 2));
      for (std::string f; flags >> f;) {
        const bool vector = f == "sse4_2" || f == "fma" || f == "f16c" || f.rfind("avx", 0) == 0 ||
                            f.rfind("amx", 0) == 0;
        if (vector) info.vector_extensions += (info.vector_extensions.empty() ? "" : " ") + f;
      }
      have_flags = true;
    }
  }
  return info;
}

// The 1, 5 and 15 minute load averages (/proc/loadavg), to show how busy a
// shared machine was while a benchmark ran; empty where unavailable.
inline std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return in ? one + " " + five + " " + fifteen : std::string{};
}

}  // namespace pensieve::bench
