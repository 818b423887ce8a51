// pensieve-model pre-tokenize: the words a byte-level BPE pre-tokenizer
// splits text into, for people checking a vocabulary's pre-tokenizer and for
// the oracle test (tests/gpu/pre_tokenizers/oracle.mjs) that compares the
// splits with JavaScript's own regex engine running the same regexes.
//   pre-tokenize NAME                 UTF-8 text on stdin -> a JSON array of its words
//   pre-tokenize --batch CASES.json   {"cases": [{"pre": NAME, "text": TEXT}, ...]} ->
//                                     [[WORD, ...] | {"error": MESSAGE}, ...] on one line
// NAME is a GGUF tokenizer.ggml.pre name ("llama-bpe", "qwen2", "tekken", ...).
#include "gpu/text/pre_tokenizer.hpp"
#include "tools/pensieve-model/commands.hpp"

#include <boost/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace pensieve::tools {

namespace {

namespace json = boost::json;

json::value split(std::string_view pre, std::string_view text) {
  auto kind = model::pre_tokenizer_from_name(pre);
  if (!kind) return json::object{{"error", kind.error().message}};
  json::array words;
  for (const std::string& word : model::pre_tokenize(*kind, text)) words.emplace_back(word);
  return words;
}

int batch(const char* cases_path) {
  std::ifstream in(cases_path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) {
    std::fprintf(stderr, "pre-tokenize: cannot read %s\n", cases_path);
    return 1;
  }
  boost::system::error_code ec;
  const json::value cases = json::parse(text.str(), ec);
  const json::value* list =
      !ec && cases.is_object() ? cases.as_object().if_contains("cases") : nullptr;
  if (list == nullptr || !list->is_array()) {
    std::fprintf(stderr, "pre-tokenize: %s is not {\"cases\": [...]}\n", cases_path);
    return 1;
  }
  json::array results;
  for (const json::value& c : list->as_array()) {
    const json::object* o = c.if_object();
    const json::value* pre = o ? o->if_contains("pre") : nullptr;
    const json::value* t = o ? o->if_contains("text") : nullptr;
    if (!pre || !pre->is_string() || !t || !t->is_string()) {
      std::fprintf(stderr, "pre-tokenize: a case needs a \"pre\" and a \"text\" string\n");
      return 1;
    }
    results.push_back(split(pre->as_string(), t->as_string()));
  }
  std::cout << json::serialize(results) << "\n";
  return 0;
}

}  // namespace

int cmd_pre_tokenize(int argc, char** argv) {
  if (argc == 3 && std::string_view(argv[1]) == "--batch") return batch(argv[2]);
  if (argc != 2 || std::string_view(argv[1]).starts_with("--")) {
    std::fprintf(stderr, "usage: pre-tokenize NAME < text | pre-tokenize --batch CASES.json\n");
    return 2;
  }
  std::ostringstream text;
  text << std::cin.rdbuf();
  const json::value words = split(argv[1], text.str());
  if (words.is_object()) {
    std::fprintf(stderr, "pre-tokenize: %s\n",
                 std::string(words.as_object().at("error").as_string()).c_str());
    return 1;
  }
  std::cout << json::serialize(words) << "\n";
  return 0;
}

}  // namespace pensieve::tools
