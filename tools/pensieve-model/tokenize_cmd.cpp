// pensieve-model tokenize FILE [--bos] [--parse-special]
//   UTF-8 text on stdin (all of it, byte for byte: a trailing newline is
//   text too) -> the token ids, space-separated, on one line.
// pensieve-model detokenize FILE [--render-special]
//   whitespace-separated ids on stdin -> the text, byte for byte, no newline added.
// FILE is a GGUF model or vocabulary, or a Hugging Face directory (or its
// tokenizer.json).
#include "gpu/model/gguf_tokenizer.hpp"
#include "gpu/text/tokenizer.hpp"
#include "gpu/model/tokenizer_json.hpp"
#include "tools/pensieve-model/commands.hpp"

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace pensieve::tools {

namespace {

using model::TokenId;
using model::Tokenizer;

struct Args {
  std::string file;
  bool bos = false;
  bool parse_special = false;
  bool render_special = false;
};

// Parses FILE and the flags this command accepts; prints why on failure.
bool parse_args(int argc, char** argv, const std::vector<std::string_view>& flags, Args& args) {
  const char* command = argc > 0 ? argv[0] : "tokenize";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool allowed = std::find(flags.begin(), flags.end(), arg) != flags.end();
    if (allowed && arg == "--bos") {
      args.bos = true;
    } else if (allowed && arg == "--parse-special") {
      args.parse_special = true;
    } else if (allowed && arg == "--render-special") {
      args.render_special = true;
    } else if (!arg.starts_with("--") && args.file.empty()) {
      args.file = arg;
    } else {
      std::fprintf(stderr, "pensieve-model %s: unexpected argument '%s'\n", command, argv[i]);
      return false;
    }
  }
  if (args.file.empty()) {
    std::fprintf(stderr, "pensieve-model %s: missing FILE (a GGUF file or a Hugging Face directory)\n",
                 command);
    return false;
  }
  return true;
}

Result<Tokenizer> load_tokenizer(const std::string& file) {
  namespace fs = std::filesystem;
  const fs::path path(file);
  Result<model::TokenizerData> data = fail("unreachable");
  if (fs::is_directory(path)) {
    data = model::read_hf_tokenizer(path);
  } else if (path.extension() == ".json") {
    data = model::read_hf_tokenizer(path.parent_path().empty() ? fs::path(".") : path.parent_path());
  } else {
    data = model::read_gguf_tokenizer(path);
  }
  if (!data) return data.error();
  auto tokenizer = Tokenizer::from_data(std::move(*data));
  if (!tokenizer) return fail(file + ": " + tokenizer.error().message);
  return tokenizer;
}

std::string read_stdin() {
  std::ostringstream text;
  text << std::cin.rdbuf();
  return text.str();
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  Args args;
  if (!parse_args(argc, argv, {"--bos", "--parse-special"}, args)) return 2;
  auto tokenizer = load_tokenizer(args.file);
  if (!tokenizer) {
    std::fprintf(stderr, "pensieve-model tokenize: %s\n", tokenizer.error().message.c_str());
    return 1;
  }
  const std::vector<TokenId> ids = tokenizer->encode(read_stdin(), args.bos, args.parse_special);
  std::string line;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line.push_back(' ');
    line += std::to_string(ids[i]);
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

int cmd_detokenize(int argc, char** argv) {
  Args args;
  if (!parse_args(argc, argv, {"--render-special"}, args)) return 2;
  auto tokenizer = load_tokenizer(args.file);
  if (!tokenizer) {
    std::fprintf(stderr, "pensieve-model detokenize: %s\n", tokenizer.error().message.c_str());
    return 1;
  }
  std::vector<TokenId> ids;
  std::istringstream in(read_stdin());
  for (std::string word; in >> word;) {
    TokenId id = -1;
    const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), id);
    if (error != std::errc() || end != word.data() + word.size() || !tokenizer->contains(id)) {
      std::fprintf(stderr, "pensieve-model detokenize: '%s' is not a token id of %s (0..%zu)\n",
                   word.c_str(), args.file.c_str(), tokenizer->vocab_size() - 1);
      return 1;
    }
    ids.push_back(id);
  }
  const std::string text = tokenizer->decode(ids, model::DecodeOptions{.render_special = args.render_special});
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace pensieve::tools
