#pragma once
// ReplyMemo: the token ids the server generated for the replies of
// stateless requests, keyed by (cache namespace, the reply's text). A
// client that resends the whole history sends those replies back as text,
// and encoding the text again need not give the ids the model wrote (BPE
// merges across the boundary, byte fallback), and one differing token
// loses the rest of the cached prefix. encode() puts the remembered ids in
// place of a resent reply's text, so the history maps token for token onto
// the KV its earlier turn left cached, and the model sees its own tokens,
// as a conversation's history keeps them.
//
// Bounded by bytes: the least recently used reply leaves first once the
// entries' ids, keys and bookkeeping (entry_bytes) pass `capacity_bytes`
// (a forgotten reply is encoded from its text again: a valid prompt, the
// same with or without a cache, but a shorter cache hit).
//
// Why not "for as long as its blocks live" (issue 21): which ids stand for
// a resent reply decide the model's input, and so the tokens it writes. A
// memo that forgot a reply when the cache evicted its KV would make a
// stateless client's outputs depend on eviction (memory pressure, other
// tenants' traffic, the tier sizes), and a server with a cache would answer
// a resent history differently from a --no-state one, which caches nothing
// and still remembers (issue 21's first invariant: the same tokens as
// --no-state; tests/actors/engine_reply_memo_test.cpp: a memo emptied with
// the cache gave a 121-token prompt where --no-state's was 127). A bound
// that depends only on the requests keeps both servers' memos, and so their
// tokens, equal; bytes rather than a count of replies bound the memory
// whatever the replies' lengths (the count of 4096 used until 2026-12-06
// kept 4096 replies whether they were 3 tokens or 3,000 long).
//
// Owned by the Engine; used by conversation actors on the control thread
// only.
#include "gpu/text/chat_template.hpp"
#include "gpu/text/tokenizer.hpp"

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pensieve::actors {

class ReplyMemo {
 public:
  explicit ReplyMemo(std::size_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  // Remembers `generated` as the ids of `text` in `ns`, when they are the
  // ids of exactly that text (a trailing special token, which the template's
  // suffix writes again, is left out; ids whose text the client saw only in
  // part are not remembered).
  void remember(const model::Tokenizer& tokenizer, std::string_view ns, std::string_view text,
                std::span<const std::int32_t> generated);
  // The remembered ids of `text` in `ns`, or null.
  const std::vector<std::int32_t>* find(std::string_view ns, std::string_view text);
  std::size_t size() const { return entries_.size(); }
  // What the entries held count against the capacity.
  std::size_t bytes() const { return bytes_; }
  // An entry's cost: its key (namespace and text), its ids, and a fixed
  // allowance for the map node, the age list's node and the vector.
  static std::size_t entry_bytes(std::size_t key_bytes, std::size_t ids) {
    return key_bytes + ids * sizeof(std::int32_t) + kEntryOverheadBytes;
  }
  static constexpr std::size_t kEntryOverheadBytes = 160;

  // `pieces` (the rendering of `messages`) encoded as
  // Tokenizer::encode_pieces does, except that a piece of client text that
  // is an assistant message's whole content and a remembered reply gives
  // its remembered ids; the text around it is encoded as separate runs, as
  // a conversation's history encodes its turns.
  std::vector<std::int32_t> encode(const model::Tokenizer& tokenizer, std::string_view ns,
                                   std::span<const model::ChatMessage> messages,
                                   std::span<const model::TextPiece> pieces, bool add_bos);

 private:
  struct Entry {
    std::vector<std::int32_t> ids;
    std::list<std::string>::iterator age;
  };
  static std::string key_of(std::string_view ns, std::string_view text);

  void erase(std::unordered_map<std::string, Entry>::iterator it);

  std::size_t capacity_bytes_;
  std::size_t bytes_ = 0;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> ages_;  // keys, most recently used first
};

}  // namespace pensieve::actors
