// `pensieve-model tokenize FILE` / `detokenize FILE` as a user runs them:
// text on stdin -> one line of the ids the library's tokenizer gives, and
// those ids back to the same bytes.
#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/gguf_tokenizer.hpp"
#include "gpu/text/tokenizer.hpp"
#include "tests/shared_data.hpp"
#include "tests/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace pensieve::model;

namespace {

using pensieve::testing::TempDir;

fs::path tool() {
  const auto path = fs::path(PENSIEVE_BINARY_DIR) / "tools" / "pensieve-model";
  if (!fs::exists(path)) {
    std::fprintf(stderr, "SKIPPED: %s is not built\n", path.c_str());
    std::exit(pensieve::testing::skip_exit_code);
  }
  return path;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

struct Run {
  int status = -1;
  std::string out;  // stdout only
};

// Runs `pensieve-model ARGS < input` in `dir`.
Run run(const TempDir& dir, const std::string& args, const std::string& input) {
  write_file(dir.path() / "stdin", input);
  const fs::path out = dir.path() / "stdout";
  const std::string cmd = tool().string() + " " + args + " < " + (dir.path() / "stdin").string() + " > " +
                          out.string() + " 2> " + (dir.path() / "stderr").string();
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out)};
}

std::string ids_line(const std::vector<TokenId>& ids) {
  std::string line;
  for (std::size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  return line + "\n";
}

Tokenizer tokenizer_of(const fs::path& file) {
  auto data = read_gguf_tokenizer(file);
  REQUIRE(data.has_value());
  auto t = Tokenizer::from_data(std::move(*data));
  REQUIRE(t.has_value());
  return std::move(*t);
}

}  // namespace

TEST_CASE("tokenize prints the library's ids on one line and detokenize gives the text back",
          "[tools]") {
  TempDir dir("tokenize-cli");
  const fs::path vocab = dir.path() / "vocab.gguf";
  REQUIRE(write_builtin_vocab_gguf(vocab).has_value());
  const Tokenizer tokenizer = tokenizer_of(vocab);
  for (const std::string text : {"Hello world", " two  spaces and a trailing newline\n",
                                 "caf\xc3\xa9 \xe2\x82\xac 5"}) {
    INFO("text '" << text << "'");
    const auto ids = tokenizer.encode(text, false, false);
    REQUIRE(!ids.empty());
    const Run tok = run(dir, "tokenize " + vocab.string(), text);
    CHECK(tok.status == 0);
    CHECK(tok.out == ids_line(ids));
    const Run detok = run(dir, "detokenize " + vocab.string(), tok.out);
    CHECK(detok.status == 0);
    CHECK(detok.out == text);
  }
}

TEST_CASE("tokenize --bos starts with the BOS id and detokenize refuses an unknown id", "[tools]") {
  TempDir dir("tokenize-cli");
  const fs::path vocab = dir.path() / "vocab.gguf";
  REQUIRE(write_builtin_vocab_gguf(vocab).has_value());
  const Tokenizer tokenizer = tokenizer_of(vocab);
  const Run with_bos = run(dir, "tokenize " + vocab.string() + " --bos", "hi");
  CHECK(with_bos.status == 0);
  CHECK(with_bos.out == ids_line(tokenizer.encode("hi", true, false)));
  CHECK(with_bos.out.starts_with("1 "));  // builtin_vocab: id 1 is <s>
  const Run bad = run(dir, "detokenize " + vocab.string(), "5 999999");
  CHECK(bad.status != 0);
  CHECK(bad.out.empty());
}

TEST_CASE("tokenize on the llama SentencePiece vocabulary round-trips through detokenize",
          "[tools]") {
  TempDir dir("tokenize-cli");
  const fs::path vocab = pensieve::testing::shared_file("vocab/ggml-vocab-llama-spm.gguf");
  const Tokenizer tokenizer = tokenizer_of(vocab);
  const std::string text = "The quick brown fox, \xe4\xbd\xa0\xe5\xa5\xbd!  Tabs\tand 1234.";
  const Run tok = run(dir, "tokenize " + vocab.string(), text);
  CHECK(tok.status == 0);
  CHECK(tok.out == ids_line(tokenizer.encode(text, false, false)));
  const Run detok = run(dir, "detokenize " + vocab.string(), tok.out);
  CHECK(detok.status == 0);
  CHECK(detok.out == text);
}
