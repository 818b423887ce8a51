#pragma once
// Byte-level BPE pre-tokenization: splitting text into the words that BPE
// merges never cross. Each pre-tokenizer is the list of regexes its
// tokenizer.json applies as Split steps (and llama.cpp as its regex list),
// matched by hand over code points (gpu/text/pre_split_passes.hpp).
// A pre-tokenizer is chosen by its GGUF `tokenizer.ggml.pre` name or by the
// regexes of a tokenizer.json; one that is not known is an error that names
// it. Pure functions; any thread.
#include "runtime/error.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pensieve::model {

enum class PreTokenizer : std::uint8_t {
  gpt2,            // GPT-2's ByteLevel regex (phi-2, MPT, OLMo, RoBERTa)
  llama_default,   // llama.cpp's "default" (a GGUF without tokenizer.ggml.pre): punctuation, gpt2,
                   // digits
  llama3,          // Llama 3 / 3.1 / 3.2 (llama-bpe), DBRX, ChatGLM4: numbers in threes
  qwen2,           // Qwen2 / 2.5, DeepSeek-R1-Distill-Qwen: numbers digit by digit
  starcoder,       // every digit alone, then gpt2 (StarCoder, SmolLM, Command-R, Refact)
  deepseek_llm,    // DeepSeek LLM: newlines, Latin, punctuation, CJK, number runs
  deepseek_coder,  // DeepSeek Coder: newlines, letters, punctuation, CJK, single digits
  deepseek_v3,     // DeepSeek V3 / R1: numbers in threes, CJK and kana, then words
  tekken,          // Mistral Nemo's Tekken: case-aware words, single digits
  falcon,          // Falcon: punctuation, gpt2, three ASCII digits
};

// Maps a GGUF `tokenizer.ggml.pre` name ("gpt-2", "llama-bpe", "qwen2",
// "deepseek-v3", "tekken", ...) to its pre-tokenizer, with llama.cpp's
// aliases; an empty name is llama.cpp's "default" (as llama.cpp reads a file
// without the key). An unknown name is an error that names it.
Result<PreTokenizer> pre_tokenizer_from_name(std::string_view name);

// The GGUF name llama.cpp writes for it ("llama-bpe", "deepseek-coder", ...).
std::string_view pre_tokenizer_name(PreTokenizer kind);

// The regexes it applies in order, as tokenizer.json's Split steps write them
// (gpt2: the one regex of ByteLevel with use_regex; a Digits step with
// individual_digits is "\p{N}").
std::span<const std::string_view> pre_tokenizer_regexes(PreTokenizer kind);

// The pre-tokenizer whose regexes these are (compared after "\r" and "\n"
// escapes become the characters they stand for); an unknown list is an error
// that quotes it.
Result<PreTokenizer> pre_tokenizer_from_regexes(std::span<const std::string> regexes);

// Llama 3 and Tekken set ignore_merges: a word that is a token as a whole is
// taken as is, even where the merges would split it differently.
bool pre_tokenizer_ignores_merges(PreTokenizer kind);

// Splits `text` into words (UTF-8; invalid bytes come out as U+FFFD, as in
// llama.cpp). Concatenating the words gives the text back when it is valid.
std::vector<std::string> pre_tokenize(PreTokenizer kind, std::string_view text);

}  // namespace pensieve::model
