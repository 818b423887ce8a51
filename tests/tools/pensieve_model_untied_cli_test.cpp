// `pensieve-model make-test-model --untied` writes a separate output head
// (output.weight) that loads as an untied model; without it the head is tied.
#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/gguf_loader.hpp"
#include "tests/shared_data.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace pensieve::model;

TEST_CASE("make-test-model --untied writes a model with its own output head", "[tools]") {
  const auto tool = fs::path(PENSIEVE_BINARY_DIR) / "tools" / "pensieve-model";
  if (!fs::exists(tool)) {
    std::fprintf(stderr, "SKIPPED: %s is not built\n", tool.c_str());
    std::exit(pensieve::testing::skip_exit_code);
  }
  const fs::path dir = fs::temp_directory_path() / ("pensieve-untied-cli-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  REQUIRE(write_builtin_vocab_gguf(dir / "vocab.gguf").has_value());
  const std::string common = tool.string() + " make-test-model --layers 1 --dim 32 --heads 2 --kv-heads 1 " +
                             "--ff 64 --dtype f32 --vocab-from " + (dir / "vocab.gguf").string() + " > /dev/null";
  const int untied_status = std::system((common + " --untied --out " + (dir / "untied.gguf").string()).c_str());
  const int tied_status = std::system((common + " --out " + (dir / "tied.gguf").string()).c_str());
  CHECK(WIFEXITED(untied_status));
  CHECK(WEXITSTATUS(untied_status) == 0);
  CHECK(WEXITSTATUS(tied_status) == 0);
  auto untied = load_gguf(dir / "untied.gguf");
  auto tied = load_gguf(dir / "tied.gguf");
  REQUIRE(untied.has_value());
  REQUIRE(tied.has_value());
  CHECK_FALSE(untied->config.tied_output);
  CHECK(untied->output.rows() == std::int64_t(builtin_vocab().tokens.size()));
  CHECK(untied->output.cols() == 32);
  CHECK(tied->config.tied_output);
  fs::remove_all(dir);
}
