// Acceptance: llama.cpp's tokenizer test vectors (../shared/vocab/*.inp/.out)
// reproduced exactly, from the vocabularies read out of the GGUF files.
#include "gpu/model/gguf_tokenizer.hpp"
#include "gpu/text/tokenizer.hpp"
#include "gpu/text/unicode_tables.hpp"
#include "gpu/text/utf8_stream.hpp"
#include "tests/shared_data.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

using namespace pensieve::model;
using pensieve::testing::shared_file;

namespace {

struct VocabCase {
  std::string text;
  std::vector<TokenId> ids;
};

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The format of llama.cpp's test-tokenizer-0: each test string is followed by
// "\n__ggml_vocab_test__\n" (so a string may itself begin or end with
// newlines); line i of .out holds the ids of string i, space-separated.
std::vector<VocabCase> read_cases(const std::string& vocab_name) {
  const std::string inp = read_all(shared_file("vocab/" + vocab_name + ".inp"));
  const std::string out = read_all(shared_file("vocab/" + vocab_name + ".out"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  for (std::size_t pos = 0; pos < inp.size();) {
    std::size_t next = inp.find(separator, pos);
    if (next == std::string::npos) next = inp.size();
    cases.push_back({inp.substr(pos, next - pos), {}});
    pos = next + separator.size();
  }
  std::istringstream lines(out);
  std::size_t i = 0;
  for (std::string line; std::getline(lines, line); ++i) {
    REQUIRE(i < cases.size());
    std::istringstream ids(line);
    for (TokenId id; ids >> id;) cases[i].ids.push_back(id);
  }
  REQUIRE(i == cases.size());
  return cases;
}

Tokenizer load(const std::string& vocab_name) {
  auto data = read_gguf_tokenizer(shared_file("vocab/" + vocab_name));
  REQUIRE(data.has_value());
  auto tokenizer = Tokenizer::from_data(std::move(*data));
  REQUIRE(tokenizer.has_value());
  return std::move(*tokenizer);
}

void check_all_cases(const std::string& vocab_name) {
  const Tokenizer tokenizer = load(vocab_name);
  const auto cases = read_cases(vocab_name);
  REQUIRE(cases.size() == 46);
  for (const auto& c : cases) {
    INFO("text: '" << c.text << "'");
    CHECK(tokenizer.encode(c.text, false, false) == c.ids);
  }
}

void check_round_trips(const std::string& vocab_name) {
  const Tokenizer tokenizer = load(vocab_name);
  for (const auto& c : read_cases(vocab_name)) {
    INFO("text: '" << c.text << "'");
    CHECK(tokenizer.decode(c.ids) == c.text);
    CHECK(tokenizer.decode(tokenizer.encode(c.text, false, false)) == c.text);
  }
}

// Feeding the pieces one at a time must give only valid UTF-8 at every step,
// and all of it together must be the decoded text.
void check_streaming(const std::string& vocab_name) {
  const Tokenizer tokenizer = load(vocab_name);
  std::size_t held_back = 0;
  for (const auto& c : read_cases(vocab_name)) {
    INFO("text: '" << c.text << "'");
    Utf8Stream stream;
    std::string streamed;
    for (TokenId id : c.ids) {
      const std::string chunk = stream.feed(tokenizer.token_to_piece(id));
      CHECK(unicode::is_valid_utf8(chunk));
      held_back += stream.pending_bytes() > 0 ? 1 : 0;
      streamed += chunk;
    }
    streamed += stream.flush();
    std::vector<TokenId> ids = c.ids;
    CHECK(streamed == tokenizer.decode(ids, DecodeOptions{.strip_leading_space = false}));
  }
  CHECK(held_back > 0);  // the vectors do split characters across byte tokens
}

}  // namespace

TEST_CASE("every llama-spm test string encodes to llama.cpp's ids") {
  check_all_cases("ggml-vocab-llama-spm.gguf");
}

TEST_CASE("every gpt-2 test string encodes to llama.cpp's ids") {
  check_all_cases("ggml-vocab-gpt-2.gguf");
}

TEST_CASE("llama-spm test strings decode back to themselves") {
  check_round_trips("ggml-vocab-llama-spm.gguf");
}

TEST_CASE("gpt-2 test strings decode back to themselves") {
  check_round_trips("ggml-vocab-gpt-2.gguf");
}

TEST_CASE("streaming the llama-spm test ids never emits a partial UTF-8 character") {
  check_streaming("ggml-vocab-llama-spm.gguf");
}

TEST_CASE("streaming the gpt-2 test ids never emits a partial UTF-8 character") {
  check_streaming("ggml-vocab-gpt-2.gguf");
}

TEST_CASE("the tiny-llama golden prompt tokenizes as llama.cpp did, with BOS") {
  auto data = read_gguf_tokenizer(shared_file("models/tiny-llama-f16.gguf"));
  REQUIRE(data.has_value());
  const auto tokenizer = Tokenizer::from_data(std::move(*data)).value();
  CHECK(tokenizer.adds_bos_by_default());
  CHECK(tokenizer.encode("The capital of France is", true, false) ==
        std::vector<TokenId>{1, 450, 7483, 310, 3444, 338});
  const std::vector<TokenId> with_bos = {1, 450, 7483, 310, 3444, 338};
  CHECK(tokenizer.decode(with_bos) == "The capital of France is");
  CHECK(tokenizer.decode(with_bos, DecodeOptions{.render_special = true}) ==
        "<s>The capital of France is");
}

TEST_CASE("the llama-spm vocabulary names its special tokens") {
  const Tokenizer tokenizer = load("ggml-vocab-llama-spm.gguf");
  CHECK(tokenizer.vocab_size() == 32000);
  CHECK(tokenizer.bos_id() == 1);
  CHECK(tokenizer.eos_id() == 2);
  CHECK(tokenizer.is_control(1));
  CHECK(tokenizer.is_special(0));
  CHECK_FALSE(tokenizer.is_special(15043));
  CHECK(tokenizer.is_end_of_generation(2));
  CHECK(tokenizer.token_to_piece(15043) == " Hello");
  CHECK(tokenizer.token_to_piece(13) == "\n");  // <0x0A>
  CHECK(tokenizer.token_to_piece(1).empty());
  CHECK(tokenizer.token_to_piece(1, true) == "<s>");
}

TEST_CASE("special tokens in llama-spm text are matched only when parsing specials") {
  const Tokenizer tokenizer = load("ggml-vocab-llama-spm.gguf");
  const auto parsed = tokenizer.encode("Hello</s>", false, true);
  REQUIRE(parsed.size() == 2);
  CHECK(parsed == std::vector<TokenId>{15043, 2});
  const auto literal = tokenizer.encode("Hello</s>", false, false);
  CHECK(std::find(literal.begin(), literal.end(), 2) == literal.end());
  CHECK(tokenizer.decode(literal) == "Hello</s>");
}

TEST_CASE("gpt-2's end of text token is parsed as one token only when asked") {
  const Tokenizer tokenizer = load("ggml-vocab-gpt-2.gguf");
  const auto eot = tokenizer.find_piece("<|endoftext|>");
  REQUIRE(eot.has_value());
  CHECK(tokenizer.encode("Hello<|endoftext|>", false, true) == std::vector<TokenId>{15496, *eot});
  CHECK(tokenizer.encode("Hello<|endoftext|>", false, false).size() > 2);
  CHECK(tokenizer.is_end_of_generation(*eot));
}
