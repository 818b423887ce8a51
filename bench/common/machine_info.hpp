#pragma once
// What a benchmark result must say about the machine it ran on.
#include <fstream>
#include <string>
#include <thread>

namespace pensieve::bench {

struct MachineInfo {
  unsigned hardware_threads = 0;
  std::string cpu_model;
};

inline MachineInfo machine_info() {
  MachineInfo info;
  info.hardware_threads = std::thread::hardware_concurrency();
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) info.cpu_model = line.substr(colon + 2);
      break;
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
