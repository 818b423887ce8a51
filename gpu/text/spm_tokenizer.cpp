#include "gpu/text/spm_tokenizer.hpp"

#include "gpu/text/unicode_tables.hpp"

#include <map>
#include <queue>
#include <utility>

namespace pensieve::model {

namespace {

// One piece of the text being merged, linked to its neighbours; a symbol
// merged into its left neighbour keeps length 0.
struct Symbol {
  int prev;
  int next;
  std::size_t offset;
  std::size_t length;
};

struct Bigram {
  int left;
  int right;
  float score;
  std::size_t length;  // bytes of the merged piece, to detect stale entries
};

// Highest score first; on a tie the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmSession {
 public:
  SpmSession(const Vocab& vocab, std::string_view text) : vocab_(vocab), text_(text) {}

  void encode(std::vector<TokenId>& out);

 private:
  std::string_view piece(int left, int right) const {
    return text_.substr(symbols_[left].offset, symbols_[left].length + symbols_[right].length);
  }
  void try_add_bigram(int left, int right);
  void resegment(int index, std::vector<TokenId>& out) const;

  const Vocab& vocab_;
  std::string_view text_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
  // The pair a merged piece came from, for pieces that are not themselves
  // tokens (kept as llama.cpp keeps it: by text, last pair wins).
  std::map<std::string, std::pair<int, int>, std::less<>> rev_merge_;
};

void SpmSession::try_add_bigram(int left, int right) {
  if (left < 0 || right < 0) return;
  const std::string_view text = piece(left, right);
  const auto id = vocab_.find(text);
  if (!id) return;
  queue_.push(Bigram{left, right, vocab_.score(*id), text.size()});
  rev_merge_[std::string(text)] = {left, right};
}

void SpmSession::resegment(int index, std::vector<TokenId>& out) const {
  const Symbol& symbol = symbols_[static_cast<std::size_t>(index)];
  const std::string_view text = text_.substr(symbol.offset, symbol.length);
  if (const auto id = vocab_.find(text)) {
    out.push_back(*id);
    return;
  }
  if (const auto it = rev_merge_.find(text); it != rev_merge_.end()) {
    resegment(it->second.first, out);
    resegment(it->second.second, out);
    return;
  }
  for (char c : text) {
    if (const auto id = vocab_.byte_token(static_cast<std::uint8_t>(c))) out.push_back(*id);
  }
}

void SpmSession::encode(std::vector<TokenId>& out) {
  for (std::size_t offset = 0; offset < text_.size();) {
    const std::size_t length =
        std::min(unicode::utf8_sequence_length(text_[offset]), text_.size() - offset);
    const int index = static_cast<int>(symbols_.size());
    offset += length;
    symbols_.push_back({index - 1, offset == text_.size() ? -1 : index + 1, offset - length, length});
  }
  for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) try_add_bigram(i - 1, i);

  while (!queue_.empty()) {
    const Bigram bigram = queue_.top();
    queue_.pop();
    Symbol& left = symbols_[static_cast<std::size_t>(bigram.left)];
    Symbol& right = symbols_[static_cast<std::size_t>(bigram.right)];
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) {
      continue;  // one side was merged elsewhere since this pair was queued
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols_[static_cast<std::size_t>(right.next)].prev = bigram.left;
    try_add_bigram(left.prev, bigram.left);
    try_add_bigram(bigram.left, left.next);
  }
  if (symbols_.empty()) return;
  for (int i = 0; i != -1; i = symbols_[static_cast<std::size_t>(i)].next) resegment(i, out);
}

}  // namespace

std::string spm_escape_spaces(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') {
      escaped.append(spm_space);
    } else {
      escaped.push_back(c);
    }
  }
  return escaped;
}

void spm_encode(const Vocab& vocab, std::string_view escaped_text, std::vector<TokenId>& out) {
  SpmSession session(vocab, escaped_text);
  session.encode(out);
}

}  // namespace pensieve::model
