#pragma once
// Test data from ../shared (models, golden outputs, vocabularies, chats) is
// referenced in place, never copied. Where the folder is absent the test is
// reported as SKIPPED by ctest (exit code 77), never as passed.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace pensieve::testing {

inline constexpr int skip_exit_code = 77;

inline std::filesystem::path shared_dir() {
  return std::filesystem::path(PENSIEVE_SOURCE_DIR) / ".." / "shared";
}

// The path of `relative` under ../shared; exits the test process as skipped
// with a clear message when it is not there.
inline std::filesystem::path shared_file(const std::string& relative) {
  auto path = shared_dir() / relative;
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr, "SKIPPED: %s not found (the ../shared test data folder is absent)\n",
                 path.c_str());
    std::exit(skip_exit_code);
  }
  return path;
}

}  // namespace pensieve::testing
