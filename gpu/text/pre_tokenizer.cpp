#include "gpu/text/pre_tokenizer.hpp"

#include "gpu/text/pre_split_passes.hpp"
#include "gpu/text/unicode_tables.hpp"

#include <array>

namespace pensieve::model {

namespace {

using pre_split::Pass;

// The regexes as tokenizer.json writes them (JSON-decoded); where a family
// has no tokenizer.json of its own (llama.cpp's default, Falcon), llama.cpp's
// list.
constexpr std::string_view gpt2_regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view llama3_regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view qwen2_regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view tekken_regex =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view deepseek_v3_words_regex =
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view deepseek_latin_regex =
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-"
    "\u02AF\u0370-"
    "\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-"
    "\u03F5\u03F7-\u0481"
    "\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-"
    "\u1CBF\u1D00-"
    "\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-"
    "\u1F57"
    "\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-"
    "\u1FCC\u1FD0-\u1FD3"
    "\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-"
    "\u211D"
    "\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-"
    "\u2149\u214E\u2183\u2184\u2C00-"
    "\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-"
    "\uA787"
    "\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-"
    "\U0001044F"
    "\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-"
    "\U00010CF2\U000118A0-"
    "\U000118DF\U0001E900-\U0001E943]+";
constexpr std::string_view deepseek_punctuation_regex =
    "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+";
constexpr std::string_view deepseek_cjk_regex = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+";
constexpr std::string_view cjk_kana_regex = "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+";
constexpr std::string_view newline_regex = "[\\r\\n]";
constexpr std::string_view single_number_regex = "\\p{N}";
constexpr std::string_view number_runs_regex = "\\p{N}+";
constexpr std::string_view number_triples_regex = "\\p{N}{1,3}";
constexpr std::string_view ascii_digit_triples_regex = "[0-9][0-9][0-9]";
constexpr std::string_view punctuation_runs_regex = "[\\p{P}\\$\\+<=>\\^~\\|]+";
constexpr std::string_view falcon_punctuation_regex = "[\\p{P}\\$\\+<=>\\^~\\|`]+";

struct Step {
  Pass pass;
  std::string_view regex;
};

constexpr Step gpt2_steps[] = {{Pass::gpt2, gpt2_regex}};
constexpr Step llama_default_steps[] = {{Pass::punctuation_runs, punctuation_runs_regex},
                                        {Pass::gpt2, gpt2_regex},
                                        {Pass::number_runs, number_runs_regex},
                                        {Pass::ascii_digit_triples, ascii_digit_triples_regex}};
constexpr Step llama3_steps[] = {{Pass::llama3, llama3_regex}};
constexpr Step qwen2_steps[] = {{Pass::qwen2, qwen2_regex}};
constexpr Step starcoder_steps[] = {{Pass::single_numbers, single_number_regex},
                                    {Pass::gpt2, gpt2_regex}};
constexpr Step deepseek_llm_steps[] = {{Pass::newlines, newline_regex},
                                       {Pass::deepseek_latin, deepseek_latin_regex},
                                       {Pass::deepseek_punctuation, deepseek_punctuation_regex},
                                       {Pass::trailing_spaces, "\\s+$"},
                                       {Pass::deepseek_cjk, deepseek_cjk_regex},
                                       {Pass::number_runs, number_runs_regex}};
constexpr Step deepseek_coder_steps[] = {{Pass::newlines, newline_regex},
                                         {Pass::space_letters, "\\s?\\p{L}+"},
                                         {Pass::space_punctuation, "\\s?\\p{P}+"},
                                         {Pass::deepseek_cjk, deepseek_cjk_regex},
                                         {Pass::single_numbers, single_number_regex}};
constexpr Step deepseek_v3_steps[] = {{Pass::number_triples, number_triples_regex},
                                      {Pass::cjk_kana, cjk_kana_regex},
                                      {Pass::deepseek_v3_words, deepseek_v3_words_regex}};
constexpr Step tekken_steps[] = {{Pass::tekken, tekken_regex}};
constexpr Step falcon_steps[] = {{Pass::falcon_punctuation, falcon_punctuation_regex},
                                 {Pass::gpt2, gpt2_regex},
                                 {Pass::ascii_digit_triples, ascii_digit_triples_regex}};

struct Family {
  PreTokenizer kind;
  std::span<const std::string_view> names;  // the first is the one llama.cpp's converter writes
  std::span<const Step> steps;
  bool ignore_merges;
};

// llama.cpp's names (src/llama-vocab.cpp, February 2025) for each family.
constexpr std::string_view gpt2_names[] = {
    "gpt-2",   "gpt2",       "phi-2",      "mpt",        "olmo",         "jais",     "jina-es",
    "jina-de", "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code", "gigachat", "roberta-bpe"};
constexpr std::string_view llama_default_names[] = {"default"};
constexpr std::string_view llama3_names[] = {"llama-bpe", "llama3",    "llama-v3",   "falcon3",
                                             "dbrx",      "smaug-bpe", "chatglm-bpe"};
constexpr std::string_view qwen2_names[] = {"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"};
constexpr std::string_view starcoder_names[] = {"starcoder", "smollm", "refact",    "command-r",
                                                "codeshell", "exaone", "minerva-7b"};
constexpr std::string_view deepseek_llm_names[] = {"deepseek-llm"};
constexpr std::string_view deepseek_coder_names[] = {"deepseek-coder"};
constexpr std::string_view deepseek_v3_names[] = {"deepseek-v3"};
constexpr std::string_view tekken_names[] = {"tekken"};
constexpr std::string_view falcon_names[] = {"falcon"};

constexpr Family families[] = {
    {PreTokenizer::gpt2, gpt2_names, gpt2_steps, false},
    {PreTokenizer::llama_default, llama_default_names, llama_default_steps, false},
    {PreTokenizer::llama3, llama3_names, llama3_steps, true},
    {PreTokenizer::qwen2, qwen2_names, qwen2_steps, false},
    {PreTokenizer::starcoder, starcoder_names, starcoder_steps, false},
    {PreTokenizer::deepseek_llm, deepseek_llm_names, deepseek_llm_steps, false},
    {PreTokenizer::deepseek_coder, deepseek_coder_names, deepseek_coder_steps, false},
    {PreTokenizer::deepseek_v3, deepseek_v3_names, deepseek_v3_steps, false},
    {PreTokenizer::tekken, tekken_names, tekken_steps, true},
    {PreTokenizer::falcon, falcon_names, falcon_steps, false},
};

const Family& family_of(PreTokenizer kind) {
  return families[static_cast<std::size_t>(kind)];
}

static_assert([] {
  for (std::size_t i = 0; i < std::size(families); ++i) {
    if (static_cast<std::size_t>(families[i].kind) != i) return false;
  }
  return true;
}());

// The regexes of each family, as a flat list per family (for
// pre_tokenizer_regexes' span).
template <std::size_t N>
constexpr std::array<std::string_view, N> regexes_of(const Step (&steps)[N]) {
  std::array<std::string_view, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = steps[i].regex;
  return out;
}
constexpr auto gpt2_list = regexes_of(gpt2_steps);
constexpr auto llama_default_list = regexes_of(llama_default_steps);
constexpr auto llama3_list = regexes_of(llama3_steps);
constexpr auto qwen2_list = regexes_of(qwen2_steps);
constexpr auto starcoder_list = regexes_of(starcoder_steps);
constexpr auto deepseek_llm_list = regexes_of(deepseek_llm_steps);
constexpr auto deepseek_coder_list = regexes_of(deepseek_coder_steps);
constexpr auto deepseek_v3_list = regexes_of(deepseek_v3_steps);
constexpr auto tekken_list = regexes_of(tekken_steps);
constexpr auto falcon_list = regexes_of(falcon_steps);

// "\r" and "\n" escapes and the characters themselves mean the same to a
// regex; tokenizer.json files write both.
std::string canonical_regex(std::string_view regex) {
  std::string out;
  for (std::size_t i = 0; i < regex.size(); ++i) {
    if (regex[i] == '\\' && i + 1 < regex.size()) {
      const char next = regex[++i];
      if (next == 'r') {
        out.push_back('\r');
      } else if (next == 'n') {
        out.push_back('\n');
      } else {
        out.push_back('\\');
        out.push_back(next);
      }
      continue;
    }
    out.push_back(regex[i]);
  }
  return out;
}

std::string known_names() {
  std::string out;
  for (const Family& f : families) {
    if (!out.empty()) out += ", ";
    out += f.names[0];
  }
  return out;
}

}  // namespace

Result<PreTokenizer> pre_tokenizer_from_name(std::string_view name) {
  if (name.empty()) return PreTokenizer::llama_default;
  for (const Family& f : families) {
    for (std::string_view n : f.names) {
      if (n == name) return f.kind;
    }
  }
  return fail("unknown BPE pre-tokenizer '" + std::string(name) + "' (known: " + known_names() +
              ", and llama.cpp's aliases of these)");
}

std::string_view pre_tokenizer_name(PreTokenizer kind) {
  return family_of(kind).names[0];
}

std::span<const std::string_view> pre_tokenizer_regexes(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::gpt2:
      return gpt2_list;
    case PreTokenizer::llama_default:
      return llama_default_list;
    case PreTokenizer::llama3:
      return llama3_list;
    case PreTokenizer::qwen2:
      return qwen2_list;
    case PreTokenizer::starcoder:
      return starcoder_list;
    case PreTokenizer::deepseek_llm:
      return deepseek_llm_list;
    case PreTokenizer::deepseek_coder:
      return deepseek_coder_list;
    case PreTokenizer::deepseek_v3:
      return deepseek_v3_list;
    case PreTokenizer::tekken:
      return tekken_list;
    case PreTokenizer::falcon:
      return falcon_list;
  }
  return {};
}

Result<PreTokenizer> pre_tokenizer_from_regexes(std::span<const std::string> regexes) {
  for (const Family& f : families) {
    if (f.steps.size() != regexes.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < regexes.size() && same; ++i) {
      same = canonical_regex(regexes[i]) == canonical_regex(f.steps[i].regex);
    }
    if (same) return f.kind;
  }
  std::string listed;
  for (const std::string& r : regexes) {
    if (!listed.empty()) listed += ", ";
    listed += "'" + r + "'";
  }
  return fail("unknown BPE pre-tokenizer: the regexes [" + listed +
              "] are not those of any known one (" + known_names() + ")");
}

bool pre_tokenizer_ignores_merges(PreTokenizer kind) {
  return family_of(kind).ignore_merges;
}

std::vector<std::string> pre_tokenize(PreTokenizer kind, std::string_view text) {
  const std::vector<std::uint32_t> cpts = unicode::decode_utf8(text);
  std::vector<unicode::GeneralCategory> categories;
  categories.reserve(cpts.size());
  for (std::uint32_t c : cpts) categories.push_back(unicode::general_category(c));
  const pre_split::Text split_text{cpts, categories};
  std::vector<pre_split::Fragment> fragments;
  if (!cpts.empty()) fragments.push_back({0, cpts.size()});
  std::vector<pre_split::Fragment> next;
  for (const Step& step : family_of(kind).steps) {
    next.clear();
    for (const pre_split::Fragment& fragment : fragments)
      pre_split::apply_pass(step.pass, split_text, fragment, next);
    fragments.swap(next);
  }
  std::vector<std::string> words;
  words.reserve(fragments.size());
  for (const pre_split::Fragment& fragment : fragments) {
    std::string word;
    for (std::size_t i = fragment.begin; i < fragment.end; ++i) unicode::append_utf8(word, cpts[i]);
    words.push_back(std::move(word));
  }
  return words;
}

}  // namespace pensieve::model
