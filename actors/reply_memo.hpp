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
// Bounded: the least recently used reply leaves first once `capacity` are
// held (a forgotten reply is encoded from its text again: correct, and
// only a shorter cache hit).
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
  explicit ReplyMemo(std::size_t capacity) : capacity_(capacity) {}

  // Remembers `generated` as the ids of `text` in `ns`, when they are the
  // ids of exactly that text (a trailing special token, which the template's
  // suffix writes again, is left out; ids whose text the client saw only in
  // part are not remembered).
  void remember(const model::Tokenizer& tokenizer, std::string_view ns, std::string_view text,
                std::span<const std::int32_t> generated);
  // The remembered ids of `text` in `ns`, or null.
  const std::vector<std::int32_t>* find(std::string_view ns, std::string_view text);
  std::size_t size() const { return entries_.size(); }

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

  std::size_t capacity_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> ages_;  // keys, most recently used first
};

}  // namespace pensieve::actors
