#include "actors/reply_memo.hpp"

#include "gpu/text/utf8_stream.hpp"

#include <algorithm>

namespace pensieve::actors {

std::string ReplyMemo::key_of(std::string_view ns, std::string_view text) {
  std::string key = std::to_string(ns.size()) + ":";
  key += ns;
  key += text;
  return key;
}

void ReplyMemo::remember(const model::Tokenizer& tokenizer, std::string_view ns, std::string_view text,
                         std::span<const std::int32_t> generated) {
  if (text.empty()) return;
  if (!generated.empty() && tokenizer.is_special(generated.back())) generated = generated.first(generated.size() - 1);
  // The text the client saw for these ids (whole characters, U+FFFD for
  // broken ones, as the reply was streamed).
  model::Utf8Stream utf8;
  std::string decoded;
  for (std::int32_t id : generated) {
    if (tokenizer.is_special(id)) return;  // text the client never saw
    decoded += utf8.feed(tokenizer.token_to_piece(id));
  }
  decoded += utf8.flush();
  if (decoded != text) return;  // the text was cut short of its ids
  std::string key = key_of(ns, text);
  const std::size_t cost = entry_bytes(key.size(), generated.size());
  if (cost > capacity_bytes_) return;  // it would push out everything and still not fit
  if (auto it = entries_.find(key); it != entries_.end()) erase(it);
  ages_.push_front(key);
  entries_.emplace(std::move(key), Entry{std::vector<std::int32_t>(generated.begin(), generated.end()), ages_.begin()});
  bytes_ += cost;
  while (bytes_ > capacity_bytes_) erase(entries_.find(ages_.back()));
}

void ReplyMemo::erase(std::unordered_map<std::string, Entry>::iterator it) {
  bytes_ -= entry_bytes(it->first.size(), it->second.ids.size());
  ages_.erase(it->second.age);
  entries_.erase(it);
}

const std::vector<std::int32_t>* ReplyMemo::find(std::string_view ns, std::string_view text) {
  auto it = entries_.find(key_of(ns, text));
  if (it == entries_.end()) return nullptr;
  ages_.splice(ages_.begin(), ages_, it->second.age);
  return &it->second.ids;
}

std::vector<std::int32_t> ReplyMemo::encode(const model::Tokenizer& tokenizer, std::string_view ns,
                                            std::span<const model::ChatMessage> messages,
                                            std::span<const model::TextPiece> pieces, bool add_bos) {
  auto is_reply = [&](std::string_view text) {
    return std::any_of(messages.begin(), messages.end(),
                       [&](const model::ChatMessage& m) { return m.role == "assistant" && m.content == text; });
  };
  std::vector<std::int32_t> out;
  std::size_t run = 0;  // the first piece not encoded yet
  auto flush = [&](std::size_t end) {
    if (end > run || (add_bos && out.empty())) {
      const auto ids = tokenizer.encode_pieces(pieces.subspan(run, end - run), add_bos && out.empty());
      out.insert(out.end(), ids.begin(), ids.end());
    }
    run = end;
  };
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].parse_special || pieces[i].text.empty() || !is_reply(pieces[i].text)) continue;
    const std::vector<std::int32_t>* ids = find(ns, pieces[i].text);
    if (!ids) continue;
    flush(i);
    out.insert(out.end(), ids->begin(), ids->end());
    run = i + 1;
  }
  flush(pieces.size());
  return out;
}

}  // namespace pensieve::actors
