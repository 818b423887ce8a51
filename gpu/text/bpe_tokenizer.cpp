#include "gpu/text/bpe_tokenizer.hpp"

#include "gpu/text/unicode_tables.hpp"

#include <array>
#include <cstdio>
#include <queue>

namespace pensieve::model {

namespace {

struct ByteTables {
  std::array<std::uint32_t, 256> to_unicode{};
  std::unordered_map<std::uint32_t, std::uint8_t> to_byte;
};

bool printable_latin1(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

ByteTables make_byte_tables() {
  ByteTables t;
  std::uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    t.to_unicode[static_cast<std::size_t>(b)] = printable_latin1(b) ? static_cast<std::uint32_t>(b) : next++;
    t.to_byte[t.to_unicode[static_cast<std::size_t>(b)]] = static_cast<std::uint8_t>(b);
  }
  return t;
}

// Constant data computed once; never mutated, so sharing it is safe.
const ByteTables& byte_tables() {
  static const ByteTables tables = make_byte_tables();
  return tables;
}

std::string rank_key(std::string_view left, std::string_view right) {
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left);
  key.push_back('\0');  // byte-level pieces never contain a NUL
  key.append(right);
  return key;
}

struct Symbol {
  int prev;
  int next;
  std::size_t offset;
  std::size_t length;
};

struct Bigram {
  int left;
  int right;
  int rank;
  std::size_t length;
};

// Lowest rank first; on a tie the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

// Merges one byte-level word and appends its ids.
class BpeWord {
 public:
  BpeWord(const Vocab& vocab, const BpeRanks& ranks, std::string_view word)
      : vocab_(vocab), ranks_(ranks), word_(word) {}

  void encode(std::vector<TokenId>& out);

 private:
  std::string_view text(int i) const {
    const Symbol& s = symbols_[static_cast<std::size_t>(i)];
    return word_.substr(s.offset, s.length);
  }
  void try_add_bigram(int left, int right) {
    if (left < 0 || right < 0) return;
    if (const auto rank = ranks_.rank(text(left), text(right))) {
      queue_.push({left, right, *rank, text(left).size() + text(right).size()});
    }
  }
  void emit(int i, std::vector<TokenId>& out) const;

  const Vocab& vocab_;
  const BpeRanks& ranks_;
  std::string_view word_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
};

void BpeWord::emit(int i, std::vector<TokenId>& out) const {
  const std::string_view piece = text(i);
  if (const auto id = vocab_.find(piece)) {
    out.push_back(*id);
    return;
  }
  // No token for the merged piece: fall back to its single bytes (each byte
  // of the byte-level spelling), dropping any the vocabulary lacks.
  for (char c : piece) {
    if (const auto id = vocab_.find(std::string_view(&c, 1))) out.push_back(*id);
  }
}

void BpeWord::encode(std::vector<TokenId>& out) {
  for (std::size_t offset = 0; offset < word_.size();) {
    const std::size_t length =
        std::min(unicode::utf8_sequence_length(word_[offset]), word_.size() - offset);
    const int index = static_cast<int>(symbols_.size());
    offset += length;
    symbols_.push_back({index - 1, offset == word_.size() ? -1 : index + 1, offset - length, length});
  }
  for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) try_add_bigram(i - 1, i);
  while (!queue_.empty()) {
    const Bigram bigram = queue_.top();
    queue_.pop();
    Symbol& left = symbols_[static_cast<std::size_t>(bigram.left)];
    Symbol& right = symbols_[static_cast<std::size_t>(bigram.right)];
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length ||
        left.next != bigram.right) {
      continue;  // outdated: a side has been merged since this pair was queued
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols_[static_cast<std::size_t>(right.next)].prev = bigram.left;
    try_add_bigram(left.prev, bigram.left);
    try_add_bigram(bigram.left, left.next);
  }
  for (int i = 0; i != -1 && !symbols_.empty(); i = symbols_[static_cast<std::size_t>(i)].next) {
    emit(i, out);
  }
}

}  // namespace

std::uint32_t byte_to_unicode(std::uint8_t byte) { return byte_tables().to_unicode[byte]; }

std::optional<std::uint8_t> unicode_to_byte(std::uint32_t cpt) {
  const auto& map = byte_tables().to_byte;
  const auto it = map.find(cpt);
  if (it == map.end()) return std::nullopt;
  return it->second;
}

std::string bytes_to_bpe_piece(std::string_view bytes) {
  std::string piece;
  piece.reserve(bytes.size() * 2);
  for (char c : bytes) unicode::append_utf8(piece, byte_to_unicode(static_cast<std::uint8_t>(c)));
  return piece;
}

std::string bpe_piece_to_bytes(std::string_view piece) {
  std::string bytes;
  bytes.reserve(piece.size());
  for (std::uint32_t cpt : unicode::decode_utf8(piece)) {
    if (const auto byte = unicode_to_byte(cpt)) {
      bytes.push_back(static_cast<char>(*byte));
      continue;
    }
    bytes += "[UNK_BYTE_0x";
    for (char c : unicode::encode_utf8(cpt)) {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      bytes += hex;
    }
    bytes += "]";
  }
  return bytes;
}

Result<BpeRanks> BpeRanks::from_merges(const std::vector<std::string>& merges) {
  BpeRanks ranks;
  ranks.ranks_.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::string& merge = merges[i];
    // The separator is the first space after the first character, so a left
    // piece may itself start with a space.
    const std::size_t space = merge.find(' ', 1);
    if (space == std::string::npos || space + 1 >= merge.size()) {
      return fail("tokenizer: merge " + std::to_string(i) + " '" + merge + "' is not 'left right'");
    }
    const std::string key =
        rank_key(std::string_view(merge).substr(0, space), std::string_view(merge).substr(space + 1));
    ranks.ranks_.emplace(key, static_cast<int>(i));  // the first (lowest) rank wins
  }
  return ranks;
}

std::optional<int> BpeRanks::rank(std::string_view left, std::string_view right) const {
  const auto it = ranks_.find(rank_key(left, right));
  if (it == ranks_.end()) return std::nullopt;
  return it->second;
}

void bpe_encode(const Vocab& vocab, const BpeRanks& ranks, PreTokenizer pre, std::string_view text,
                std::vector<TokenId>& out) {
  const bool ignore_merges = pre_tokenizer_ignores_merges(pre);
  for (const std::string& word : pre_tokenize(pre, text)) {
    const std::string piece = bytes_to_bpe_piece(word);
    if (ignore_merges) {
      if (const auto id = vocab.find(piece)) {
        out.push_back(*id);
        continue;
      }
    }
    BpeWord(vocab, ranks, piece).encode(out);
  }
}

}  // namespace pensieve::model
