// The `pensieve` binary's --backend and --tp flags: parsed and checked, and
// a choice the build, the machine or the model cannot serve ends the server
// at start with one line saying why (exit 1), before it listens.
#include "tests/temp_dir.hpp"
#include "tests/tools/pensieve_child.hpp"
#include "tools/pensieve/options.hpp"

#ifdef PENSIEVE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <catch2/catch.hpp>

#include <regex>

using pensieve::server::parse_options;
using pensieve::testing::PensieveChild;

namespace {

// Runs the server until it exits; returns its exit status and the error line.
std::pair<int, std::string> start_and_fail(std::vector<std::string> args) {
  const auto binary = pensieve::testing::pensieve_binary();
  pensieve::testing::TempDir cache("pensieve-backend");
  // The built-in generated model (8 heads, 4 KV heads).
  std::vector<std::string> all{"--port", "0", "--rpc-port", "0", "--threads", "1"};
  all.insert(all.end(), args.begin(), args.end());
  PensieveChild server(binary, cache.path(), all);
  const std::string line = server.wait_for(std::regex(R"((pensieve: --[a-z]+[ :][^\n]*)\n)"), std::chrono::seconds(60));
  return {server.wait_exit(std::chrono::seconds(60)), line};
}

}  // namespace

TEST_CASE("the --backend and --tp flags parse, and bad values are a one-line reason", "[tools][backend]") {
  auto defaults = parse_options({});
  REQUIRE(defaults.has_value());
  CHECK(defaults->backend == "cpu");
  CHECK(defaults->tp == 1);
  auto o = parse_options({"--backend", "cuda", "--tp=4"});
  REQUIRE(o.has_value());
  CHECK(o->backend == "cuda");
  CHECK(o->tp == 4);
  auto bad_backend = parse_options({"--backend", "rocm"});
  REQUIRE_FALSE(bad_backend.has_value());
  CHECK(bad_backend.error().message == "--backend: 'rocm' is not cpu or cuda");
  auto bad_tp = parse_options({"--tp", "0"});
  REQUIRE_FALSE(bad_tp.has_value());
  CHECK(bad_tp.error().message == "--tp: 0 is out of range [1, 64]");
}

TEST_CASE("pensieve --backend cuda without a CUDA device exits 1 with a one-line reason", "[tools][backend]") {
#ifdef PENSIEVE_HAVE_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    std::fprintf(stderr, "SKIPPED: a CUDA device is present (tests/gpu/cuda_engine_test.cpp runs on it)\n");
    std::exit(pensieve::testing::skip_exit_code);
  }
#endif
  const auto [status, line] = start_and_fail({"--backend", "cuda"});
  INFO(line);
  CHECK(status == 1);
  CHECK(line.starts_with("pensieve: --backend cuda: "));
}

TEST_CASE("pensieve --tp that does not split the model's heads exits 1 with a one-line reason", "[tools][backend]") {
  const auto [status, line] = start_and_fail({"--tp", "3"});
  INFO(line);
  CHECK(status == 1);
  CHECK(line.starts_with("pensieve: --tp 3: tensor parallelism over 3 ranks needs n_heads"));
}
