#include "gpu/model/tokenizer_json.hpp"

#include "gpu/model/gguf_tokenizer.hpp"
#include "gpu/model/hf_config.hpp"
#include "gpu/text/pre_tokenizer.hpp"

#include <boost/json.hpp>

#include <unordered_map>

namespace pensieve::model {

namespace json = boost::json;

namespace {

Error tj_error(const std::string& label, const std::string& what) { return fail(label + ": tokenizer.json: " + what); }

bool mentions(const json::value& v, std::string_view type) {
  if (v.is_object()) {
    const json::object& o = v.get_object();
    if (const json::value* t = o.if_contains("type"); t && t->is_string() && t->get_string() == type) return true;
    for (const char* list : {"pretokenizers", "normalizers", "decoders"}) {
      if (const json::value* items = o.if_contains(list); items && items->is_array()) {
        for (const auto& item : items->get_array()) {
          if (mentions(item, type)) return true;
        }
      }
    }
  }
  return false;
}

const json::value* field(const json::object& o, std::string_view key) { return o.if_contains(key); }

std::string type_of(const json::object& o) {
  const json::value* t = field(o, "type");
  return t && t->is_string() ? std::string(t->get_string()) : std::string("(no type)");
}

bool flag(const json::object& o, std::string_view key, bool fallback) {
  const json::value* v = field(o, key);
  return v && v->is_bool() ? v->get_bool() : fallback;
}

// Appends the regexes that one byte-level pre_tokenizer step applies, in the
// form pre_tokenizer_regexes() lists them; what Pensieve cannot split by is
// an error that names it.
Result<void> collect_regexes(const json::value& step, std::vector<std::string>& regexes, const std::string& label) {
  const json::object* o = step.if_object();
  if (o == nullptr) return tj_error(label, "a pre_tokenizer step is not an object");
  const std::string type = type_of(*o);
  if (type == "Sequence") {
    const json::value* steps = field(*o, "pretokenizers");
    if (steps == nullptr || !steps->is_array()) return tj_error(label, "a Sequence pre_tokenizer has no pretokenizers list");
    for (const json::value& s : steps->get_array()) {
      if (auto ok = collect_regexes(s, regexes, label); !ok) return ok.error();
    }
    return {};
  }
  if (type == "ByteLevel") {
    if (flag(*o, "add_prefix_space", false)) {
      return tj_error(label, "pre_tokenizer ByteLevel with add_prefix_space is not supported");
    }
    if (flag(*o, "use_regex", true)) regexes.emplace_back(pre_tokenizer_regexes(PreTokenizer::gpt2)[0]);
    return {};
  }
  if (type == "Digits") {
    regexes.emplace_back(flag(*o, "individual_digits", false) ? "\\p{N}" : "\\p{N}+");
    return {};
  }
  if (type == "Split") {
    const json::value* pattern = field(*o, "pattern");
    const json::value* regex = pattern && pattern->is_object() ? field(pattern->get_object(), "Regex") : nullptr;
    const json::value* behavior = field(*o, "behavior");
    if (regex == nullptr || !regex->is_string()) {
      return tj_error(label, "pre_tokenizer Split " + (pattern ? json::serialize(*pattern) : std::string("(no pattern)")) +
                                 " is not a regex split");
    }
    if (!behavior || !behavior->is_string() || behavior->get_string() != "Isolated" || flag(*o, "invert", false)) {
      return tj_error(label, "pre_tokenizer Split '" + std::string(regex->get_string()) + "' with behavior " +
                                 (behavior ? json::serialize(*behavior) : std::string("(none)")) +
                                 " is not supported (Isolated, not inverted, is)");
    }
    regexes.emplace_back(regex->get_string());
    return {};
  }
  return tj_error(label, "pre_tokenizer type '" + type + "' is not supported for byte-level BPE");
}

// The GGUF name of the byte-level pre-tokenizer that `pre` describes.
Result<std::string> byte_level_pre_name(const json::value* pre, const std::string& label) {
  if (pre == nullptr || pre->is_null()) return tj_error(label, "a byte-level BPE vocabulary without a pre_tokenizer");
  std::vector<std::string> regexes;
  if (auto ok = collect_regexes(*pre, regexes, label); !ok) return ok.error();
  auto kind = pre_tokenizer_from_regexes(regexes);
  if (!kind) return tj_error(label, kind.error().message);
  return std::string(pre_tokenizer_name(*kind));
}

// A Metaspace pre_tokenizer adds "▁" before the text unless its
// prepend_scheme is "never" (or, in older files, add_prefix_space is false).
bool metaspace_prepends(const json::value* pre) {
  const json::object* o = pre ? pre->if_object() : nullptr;
  if (o == nullptr || type_of(*o) != "Metaspace") return false;
  const json::value* scheme = field(*o, "prepend_scheme");
  if (scheme && scheme->is_string()) return scheme->get_string() != "never";
  return flag(*o, "add_prefix_space", true);
}

// A SentencePiece-style vocabulary (byte_fallback) takes a Metaspace
// pre_tokenizer (prefix and split at "▁"), Gemma's no-op split, or none.
Result<void> check_spm_pre_tokenizer(const json::value* pre, const std::string& label) {
  if (pre == nullptr || pre->is_null()) return {};
  const json::object* o = pre->if_object();
  const std::string type = o ? type_of(*o) : std::string("(not an object)");
  if (type == "Metaspace") return {};
  if (type == "Split") {
    // Gemma: a split at " " after the normalizer has replaced every space by "▁" splits nothing.
    const json::value* pattern = field(*o, "pattern");
    const json::value* text = pattern && pattern->is_object() ? field(pattern->get_object(), "String") : nullptr;
    if (text && text->is_string() && text->get_string() == " ") return {};
  }
  return tj_error(label, "pre_tokenizer " + (o ? json::serialize(*pre) : type) +
                             " is not supported for a byte-fallback (SentencePiece-style) vocabulary");
}

// Ids are dense in real vocabularies: one far past the entry count is an error
// (and would make a fuzzed file allocate a huge token table).
std::int64_t id_limit(const json::object& root, const json::object& model) {
  std::size_t entries = 256;
  if (const json::value* v = model.if_contains("vocab"); v && v->is_object()) entries += v->get_object().size();
  if (const json::value* a = root.if_contains("added_tokens"); a && a->is_array()) entries += a->get_array().size();
  return std::int64_t(entries);
}

Result<void> read_vocab(const json::object& model, TokenizerData& tok, std::int64_t limit, const std::string& label) {
  const json::value* vocab = model.if_contains("vocab");
  if (vocab == nullptr || !vocab->is_object()) return tj_error(label, "model.vocab is not an object");
  for (const auto& [text, id] : vocab->get_object()) {
    if (!id.is_int64() || id.get_int64() < 0 || id.get_int64() >= limit) {
      return tj_error(label, "vocab id of '" + std::string(text) + "' is negative or far past the vocabulary size");
    }
    const auto i = std::size_t(id.get_int64());
    if (i >= tok.tokens.size()) tok.tokens.resize(i + 1);
    tok.tokens[i] = std::string(text);
  }
  return {};
}

Result<void> read_merges(const json::object& model, TokenizerData& tok, const std::string& label) {
  const json::value* merges = model.if_contains("merges");
  if (merges == nullptr) return {};
  if (!merges->is_array()) return tj_error(label, "model.merges is not an array");
  for (const auto& m : merges->get_array()) {
    if (m.is_string()) {
      tok.merges.emplace_back(m.get_string());
    } else if (m.is_array() && m.get_array().size() == 2 && m.get_array()[0].is_string() &&
               m.get_array()[1].is_string()) {
      tok.merges.push_back(std::string(m.get_array()[0].get_string()) + " " + std::string(m.get_array()[1].get_string()));
    } else {
      return tj_error(label, "a merge is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  return {};
}

// Added tokens overwrite or extend the vocabulary; `special` ones are control tokens.
Result<void> read_added(const json::object& root, TokenizerData& tok, std::vector<bool>& added,
                        std::vector<bool>& special, std::int64_t limit, const std::string& label) {
  const json::value* list = root.if_contains("added_tokens");
  if (list == nullptr || list->is_null()) return {};
  if (!list->is_array()) return tj_error(label, "added_tokens is not an array");
  for (const auto& a : list->get_array()) {
    const json::object* o = a.if_object();
    const json::value* id = o ? o->if_contains("id") : nullptr;
    const json::value* content = o ? o->if_contains("content") : nullptr;
    if (!id || !id->is_int64() || id->get_int64() < 0 || id->get_int64() >= limit || !content ||
        !content->is_string()) {
      return tj_error(label, "an added token needs an id and a content");
    }
    const auto i = std::size_t(id->get_int64());
    if (i >= tok.tokens.size()) tok.tokens.resize(i + 1);
    tok.tokens[i] = std::string(content->get_string());
    added.resize(tok.tokens.size());
    special.resize(tok.tokens.size());
    const json::value* sp = o->if_contains("special");
    added[i] = true;
    special[i] = sp && sp->is_bool() && sp->get_bool();
  }
  return {};
}

void assign_types_and_scores(TokenizerData& tok, const std::vector<bool>& special, const std::vector<bool>& added,
                             const std::string& unk) {
  const std::size_t n = tok.tokens.size();
  tok.token_types.assign(n, TokenType::normal);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& t = tok.tokens[i];
    if (t.empty()) {
      tok.tokens[i] = "[PAD" + std::to_string(i) + "]";  // a hole in the id space, as llama.cpp fills it
      tok.token_types[i] = TokenType::unused;
    } else if (i < added.size() && added[i]) {
      tok.token_types[i] = i < special.size() && special[i] ? TokenType::control : TokenType::user_defined;
    } else if (tok.kind == TokenizerKind::sentencepiece && t.size() == 6 && t.starts_with("<0x") && t.back() == '>') {
      tok.token_types[i] = TokenType::byte;
    }
    if (!unk.empty() && t == unk) tok.token_types[i] = TokenType::unknown;
  }
  if (tok.kind != TokenizerKind::sentencepiece) return;
  std::unordered_map<std::string, std::size_t> rank;
  for (std::size_t r = 0; r < tok.merges.size(); ++r) {
    std::string merged = tok.merges[r];
    const auto space = merged.find(' ');
    if (space != std::string::npos) merged.erase(space, 1);
    rank.emplace(std::move(merged), r);
  }
  tok.scores.assign(n, 0.0f);
  for (std::size_t i = 0; i < n; ++i) {
    auto it = rank.find(tok.tokens[i]);
    if (it != rank.end()) tok.scores[i] = -float(it->second + 1);
  }
}

Result<void> detect_kind(const json::object& o, const json::object& m, TokenizerData& tok, const std::string& label) {
  const json::value* fallback = m.if_contains("byte_fallback");
  const json::value* pre = o.if_contains("pre_tokenizer");
  const json::value* decoder = o.if_contains("decoder");
  const bool byte_level = (pre && mentions(*pre, "ByteLevel")) || (decoder && mentions(*decoder, "ByteLevel"));
  if (fallback && fallback->is_bool() && fallback->get_bool()) {
    if (auto ok = check_spm_pre_tokenizer(pre, label); !ok) return ok.error();
    tok.kind = TokenizerKind::sentencepiece;
    const json::value* norm = o.if_contains("normalizer");
    tok.add_space_prefix = (norm && mentions(*norm, "Prepend")) || metaspace_prepends(pre);
    // Metaspace splits unless told not to (files older than its "split" field always split).
    const json::object* pre_object = pre ? pre->if_object() : nullptr;
    tok.split_at_space_mark = pre_object && type_of(*pre_object) == "Metaspace" && flag(*pre_object, "split", true);
    tok.add_bos = true;
    return {};
  }
  if (byte_level) {
    tok.kind = TokenizerKind::byte_bpe;
    tok.add_space_prefix = false;
    auto name = byte_level_pre_name(pre, label);
    if (!name) return name.error();
    tok.pre = std::move(*name);
    return {};
  }
  return tj_error(label, "a BPE model that is neither byte_fallback nor ByteLevel is not supported");
}

std::int32_t id_of(const TokenizerData& tok, std::string_view text) {
  for (std::size_t i = 0; i < tok.tokens.size(); ++i) {
    if (tok.tokens[i] == text) return std::int32_t(i);
  }
  return -1;
}

// A token named in tokenizer_config.json: a string or {"content": string}.
std::optional<std::string> token_text(const json::object& cfg, std::string_view key) {
  const json::value* v = cfg.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) return std::string(v->get_string());
  if (v->is_object()) {
    if (const json::value* c = v->get_object().if_contains("content"); c && c->is_string()) {
      return std::string(c->get_string());
    }
  }
  return std::nullopt;
}

std::string chat_template_of(const json::value& v) {
  if (v.is_string()) return std::string(v.get_string());
  if (!v.is_array()) return {};
  std::string first;
  for (const auto& item : v.get_array()) {
    const json::object* o = item.if_object();
    const json::value* name = o ? o->if_contains("name") : nullptr;
    const json::value* tmpl = o ? o->if_contains("template") : nullptr;
    if (!tmpl || !tmpl->is_string()) continue;
    if (first.empty()) first = std::string(tmpl->get_string());
    if (name && name->is_string() && name->get_string() == "default") return std::string(tmpl->get_string());
  }
  return first;
}

// Defaults before tokenizer_config.json: the conventional special tokens of each kind.
void default_specials(TokenizerData& tok, const json::object& root) {
  if (tok.kind == TokenizerKind::sentencepiece) {
    tok.bos_id = id_of(tok, "<s>");
    tok.eos_id = id_of(tok, "</s>");
    tok.unk_id = id_of(tok, "<unk>");
  } else {
    // A TemplateProcessing post-processor that prepends a special token is how
    // byte-level vocabularies (Llama 3) add their BOS.
    const json::value* post = root.if_contains("post_processor");
    if (post && mentions(*post, "TemplateProcessing")) {
      const std::string text = json::serialize(*post);
      for (const char* bos : {"<|begin_of_text|>", "<|startoftext|>"}) {
        if (text.find(bos) != std::string::npos && id_of(tok, bos) >= 0) {
          tok.bos_id = id_of(tok, bos);
          tok.add_bos = true;
        }
      }
    }
  }
  tok.eot_id = find_end_of_turn_token(tok);
}

Result<void> read_config(std::string_view text, TokenizerData& tok, const std::string& label) {
  boost::system::error_code ec;
  json::value root = json::parse(text, ec);
  if (ec || !root.is_object()) return fail(label + ": tokenizer_config.json is not a JSON object");
  const json::object& cfg = root.get_object();
  const std::pair<const char*, std::int32_t*> ids[] = {
      {"bos_token", &tok.bos_id}, {"eos_token", &tok.eos_id}, {"unk_token", &tok.unk_id}, {"pad_token", &tok.pad_id}};
  for (auto [key, id] : ids) {
    if (auto t = token_text(cfg, key)) *id = id_of(tok, *t);
  }
  for (auto [key, flag] : {std::pair{"add_bos_token", &tok.add_bos}, std::pair{"add_eos_token", &tok.add_eos}}) {
    if (const json::value* v = cfg.if_contains(key); v && v->is_bool()) *flag = v->get_bool();
  }
  if (const json::value* t = cfg.if_contains("chat_template")) tok.chat_template = chat_template_of(*t);
  return {};
}

}  // namespace

Result<TokenizerData> parse_tokenizer_json(std::string_view tokenizer_json, std::string_view config_json,
                                           const std::string& label) {
  boost::system::error_code ec;
  json::value root = json::parse(tokenizer_json, ec);
  if (ec || !root.is_object()) return tj_error(label, "not a JSON object");
  const json::object& o = root.get_object();
  const json::value* model = o.if_contains("model");
  if (model == nullptr || !model->is_object()) return tj_error(label, "no model object");
  const json::object& m = model->get_object();
  const json::value* type = m.if_contains("type");
  if (type && type->is_string() && type->get_string() != "BPE") {
    return tj_error(label, "model type '" + std::string(type->get_string()) + "' is not supported (BPE is)");
  }
  TokenizerData tok;
  if (auto ok = detect_kind(o, m, tok, label); !ok) return ok.error();
  const std::int64_t limit = id_limit(o, m);
  if (auto ok = read_vocab(m, tok, limit, label); !ok) return ok.error();
  if (auto ok = read_merges(m, tok, label); !ok) return ok.error();
  std::vector<bool> added, special;
  if (auto ok = read_added(o, tok, added, special, limit, label); !ok) return ok.error();
  if (tok.tokens.empty()) return tj_error(label, "the vocabulary is empty");
  std::string unk;
  if (const json::value* u = m.if_contains("unk_token"); u && u->is_string()) unk = std::string(u->get_string());
  assign_types_and_scores(tok, special, added, unk);
  default_specials(tok, o);
  if (!config_json.empty()) {
    if (auto ok = read_config(config_json, tok, label); !ok) return ok.error();
  }
  return tok;
}

Result<TokenizerData> read_hf_tokenizer(const std::filesystem::path& dir) {
  auto text = read_text_file(dir / "tokenizer.json");
  if (!text) return text.error();
  std::string config;
  std::error_code ec;
  if (std::filesystem::exists(dir / "tokenizer_config.json", ec)) {
    auto c = read_text_file(dir / "tokenizer_config.json");
    if (!c) return c.error();
    config = std::move(*c);
  }
  return parse_tokenizer_json(*text, config, (dir / "tokenizer.json").string());
}

}  // namespace pensieve::model
