#pragma once
// Byte-level BPE (GPT-2 / Llama 3 / Qwen2 vocabularies): text is split into
// words by the pre-tokenizer, each word's bytes are mapped to printable code
// points (GPT-2's byte-to-unicode table), and adjacent pieces are merged
// lowest merge rank first. BpeRanks is immutable after construction; any
// thread.
#include "gpu/text/pre_tokenizer.hpp"
#include "gpu/text/tokenizer_vocab.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pensieve::model {

// GPT-2's bijection between the 256 byte values and printable code points:
// printable Latin-1 bytes map to themselves, the others to U+0100 upwards.
std::uint32_t byte_to_unicode(std::uint8_t byte);
std::optional<std::uint8_t> unicode_to_byte(std::uint32_t cpt);

// The byte-level spelling of raw bytes ("Hello world" -> "HelloĠworld").
std::string bytes_to_bpe_piece(std::string_view bytes);
// The raw bytes of a byte-level piece; code points outside the table are
// written as "[UNK_BYTE_0x..]" like llama.cpp (they only occur in broken vocabularies).
std::string bpe_piece_to_bytes(std::string_view piece);

class BpeRanks {
 public:
  // `merges` are "left right" lines in rank order (GGUF tokenizer.ggml.merges).
  static Result<BpeRanks> from_merges(const std::vector<std::string>& merges);

  std::optional<int> rank(std::string_view left, std::string_view right) const;
  std::size_t size() const { return ranks_.size(); }

 private:
  std::unordered_map<std::string, int, Vocab::PieceHash, std::equal_to<>> ranks_;
};

// Appends the ids of `text` (raw UTF-8, no special tokens in it) to `out`.
void bpe_encode(const Vocab& vocab, const BpeRanks& ranks, PreTokenizer pre, std::string_view text,
                std::vector<TokenId>& out);

}  // namespace pensieve::model
