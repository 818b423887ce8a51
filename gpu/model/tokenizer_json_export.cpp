#include "gpu/model/tokenizer_json_export.hpp"

#include "gpu/text/pre_tokenizer.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <fstream>
#include <unordered_map>

namespace pensieve::model {

namespace json = boost::json;

namespace {

bool is_special(const TokenizerData& tok, std::size_t i) {
  if (i >= tok.token_types.size()) return false;
  const TokenType t = tok.token_types[i];
  return t == TokenType::control || t == TokenType::unknown || t == TokenType::user_defined;
}

// Merges of a SentencePiece vocabulary: each split of a normal token into two
// vocabulary tokens, best score first (ties by token id).
std::vector<std::string> spm_merges(const TokenizerData& tok) {
  std::unordered_map<std::string, std::size_t> ids;
  for (std::size_t i = 0; i < tok.tokens.size(); ++i) ids.emplace(tok.tokens[i], i);
  struct Merge {
    float score;
    std::size_t id;
    std::string text;
  };
  std::vector<Merge> merges;
  for (std::size_t i = 0; i < tok.tokens.size(); ++i) {
    if (is_special(tok, i) || (i < tok.token_types.size() && tok.token_types[i] == TokenType::byte)) continue;
    const std::string& t = tok.tokens[i];
    for (std::size_t k = 1; k < t.size(); ++k) {
      if ((static_cast<unsigned char>(t[k]) & 0xC0) == 0x80) continue;  // inside a UTF-8 character
      if (ids.count(t.substr(0, k)) && ids.count(t.substr(k))) {
        merges.push_back({i < tok.scores.size() ? tok.scores[i] : 0.0f, i, t.substr(0, k) + " " + t.substr(k)});
      }
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return a.score != b.score ? a.score > b.score : a.id < b.id;
  });
  std::vector<std::string> out;
  out.reserve(merges.size());
  for (auto& m : merges) out.push_back(std::move(m.text));
  return out;
}

json::object model_object(const TokenizerData& tok) {
  json::object vocab;
  for (std::size_t i = 0; i < tok.tokens.size(); ++i) vocab[tok.tokens[i]] = i;
  json::array merges;
  for (const auto& m : tok.kind == TokenizerKind::sentencepiece ? spm_merges(tok) : tok.merges) merges.push_back(json::value(m));
  json::object model{{"type", "BPE"},
                     {"byte_fallback", tok.kind == TokenizerKind::sentencepiece},
                     {"vocab", std::move(vocab)},
                     {"merges", std::move(merges)}};
  if (tok.unk_id >= 0 && std::size_t(tok.unk_id) < tok.tokens.size()) model["unk_token"] = tok.tokens[std::size_t(tok.unk_id)];
  return model;
}

void set_token(const TokenizerData& tok, std::int32_t id, json::object& cfg, const char* key) {
  if (id >= 0 && std::size_t(id) < tok.tokens.size()) cfg[key] = tok.tokens[std::size_t(id)];
}

// GPT-2's regex is ByteLevel's own; every other family is its Split steps in
// order, then a ByteLevel that only maps bytes.
Result<json::value> byte_level_pre_tokenizer(const TokenizerData& tok) {
  auto kind = pre_tokenizer_from_name(tok.pre);
  if (!kind) return kind.error();
  if (*kind == PreTokenizer::gpt2) {
    return json::value(json::object{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}});
  }
  json::array steps;
  for (std::string_view regex : pre_tokenizer_regexes(*kind)) {
    steps.push_back(json::object{{"type", "Split"},
                                 {"pattern", json::object{{"Regex", regex}}},
                                 {"behavior", "Isolated"},
                                 {"invert", false}});
  }
  steps.push_back(json::object{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  return json::value(json::object{{"type", "Sequence"}, {"pretokenizers", std::move(steps)}});
}

}  // namespace

Result<std::string> tokenizer_json_text(const TokenizerData& tok) {
  json::array added;
  for (std::size_t i = 0; i < tok.tokens.size(); ++i) {
    if (!is_special(tok, i)) continue;
    added.push_back(json::object{{"id", i},
                                 {"content", tok.tokens[i]},
                                 {"special", tok.token_types[i] != TokenType::user_defined},
                                 {"normalized", false}});
  }
  json::object root{{"version", "1.0"}, {"added_tokens", std::move(added)}, {"model", model_object(tok)}};
  if (tok.kind == TokenizerKind::sentencepiece && tok.split_at_space_mark) {
    root["pre_tokenizer"] = json::object{{"type", "Metaspace"},
                                         {"replacement", "\xe2\x96\x81"},
                                         {"prepend_scheme", tok.add_space_prefix ? "always" : "never"},
                                         {"split", true}};
  } else if (tok.kind == TokenizerKind::sentencepiece) {
    json::array normalizers;
    if (tok.add_space_prefix) normalizers.push_back(json::object{{"type", "Prepend"}, {"prepend", "\xe2\x96\x81"}});
    normalizers.push_back(
        json::object{{"type", "Replace"}, {"pattern", json::object{{"String", " "}}}, {"content", "\xe2\x96\x81"}});
    root["normalizer"] = json::object{{"type", "Sequence"}, {"normalizers", std::move(normalizers)}};
    root["pre_tokenizer"] = nullptr;
  } else {
    auto pre = byte_level_pre_tokenizer(tok);
    if (!pre) return pre.error();
    root["pre_tokenizer"] = std::move(*pre);
    root["decoder"] = json::object{{"type", "ByteLevel"}};
  }
  return json::serialize(root);
}

std::string tokenizer_config_json_text(const TokenizerData& tok) {
  json::object cfg{{"add_bos_token", tok.add_bos}, {"add_eos_token", tok.add_eos}};
  set_token(tok, tok.bos_id, cfg, "bos_token");
  set_token(tok, tok.eos_id, cfg, "eos_token");
  set_token(tok, tok.unk_id, cfg, "unk_token");
  set_token(tok, tok.pad_id, cfg, "pad_token");
  if (!tok.chat_template.empty()) cfg["chat_template"] = tok.chat_template;
  return json::serialize(cfg);
}

Result<void> write_hf_tokenizer(const TokenizerData& tok, const std::filesystem::path& dir) {
  auto tokenizer_json = tokenizer_json_text(tok);
  if (!tokenizer_json) return tokenizer_json.error();
  for (auto [name, text] : {std::pair{"tokenizer.json", std::move(*tokenizer_json)},
                            std::pair{"tokenizer_config.json", tokenizer_config_json_text(tok)}}) {
    std::ofstream out(dir / name, std::ios::trunc);
    out << text << "\n";
    if (!out) return fail((dir / name).string() + ": write failed");
  }
  return {};
}

}  // namespace pensieve::model
