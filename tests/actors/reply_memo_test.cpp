// ReplyMemo: a stateless reply's generated ids come back for its resent
// text in its namespace only, in place of a re-encoding, and only for an
// assistant message's whole content.
#include "actors/reply_memo.hpp"
#include "gpu/model/builtin_vocab.hpp"

#include <catch2/catch.hpp>

using namespace pensieve;
using namespace pensieve::actors;

namespace {

model::Tokenizer vocab() {
  auto t = model::Tokenizer::from_data(model::builtin_vocab());
  REQUIRE(t.has_value());
  return std::move(*t);
}

// The text a client is shown for `ids` (ASCII here: no broken characters).
std::string text_of(const model::Tokenizer& tok, const std::vector<std::int32_t>& ids) {
  std::string text;
  for (std::int32_t id : ids) text += tok.token_to_piece(id);
  return text;
}

std::vector<std::int32_t> joined(std::vector<std::int32_t> a, const std::vector<std::int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("a remembered reply is encoded as the ids the model wrote, in its namespace only", "[reply_memo]") {
  const model::Tokenizer tok = vocab();
  // Ids the model could have written for its reply: not the encoding of the text.
  const auto written = joined(tok.encode("the c", false, false), tok.encode("at sat", false, false));
  const std::string reply = text_of(tok, written);
  REQUIRE(written != tok.encode(reply, false, false));
  ReplyMemo memo(1 << 20);
  memo.remember(tok, "t", reply, written);
  REQUIRE(memo.find("t", reply));
  CHECK(*memo.find("t", reply) == written);
  CHECK_FALSE(memo.find("u", reply));

  const std::vector<model::ChatMessage> messages = {{"user", "hi"}, {"assistant", reply}, {"user", "more"}};
  const std::vector<model::TextPiece> pieces = {{"U: ", true}, {"hi", false}, {"\nA: ", true},
                                                {reply, false},   {"\nU: ", true}, {"more", false}};
  const auto before = tok.encode_pieces(std::span(pieces).first(3), false);
  const auto after = tok.encode_pieces(std::span(pieces).subspan(4), false);
  CHECK(memo.encode(tok, "t", messages, pieces, false) == joined(joined(before, written), after));
  // Another namespace, or the same text as a user's message: encoded as text.
  CHECK(memo.encode(tok, "u", messages, pieces, false) == tok.encode_pieces(pieces, false));
  const std::vector<model::ChatMessage> asked = {{"user", "hi"}, {"user", reply}, {"user", "more"}};
  CHECK(memo.encode(tok, "t", asked, pieces, false) == tok.encode_pieces(pieces, false));
}

TEST_CASE("ids that are not the reply's whole text are not remembered, the oldest leave first", "[reply_memo]") {
  const model::Tokenizer tok = vocab();
  const auto ids = tok.encode("the cat", false, false);
  const std::string text = text_of(tok, ids);
  const auto a = tok.encode("a", false, false), b = tok.encode("b", false, false);
  // Room for the replies "a" and "b" in namespace "t" (keys "1:t" and the text), not for a third.
  ReplyMemo memo(ReplyMemo::entry_bytes(3 + text_of(tok, a).size(), a.size()) +
                 ReplyMemo::entry_bytes(3 + text_of(tok, b).size(), b.size()));
  memo.remember(tok, "t", text.substr(0, text.size() - 1), ids);  // text cut short of its ids
  CHECK_FALSE(memo.find("t", text.substr(0, text.size() - 1)));
  REQUIRE(tok.eos_id());
  memo.remember(tok, "t", text, joined(ids, {*tok.eos_id()}));  // the end token is the template's
  REQUIRE(memo.find("t", text));
  CHECK(*memo.find("t", text) == ids);
  memo.remember(tok, "t", text_of(tok, a), a);
  memo.remember(tok, "t", text_of(tok, b), b);
  CHECK(memo.size() == 2);
  CHECK_FALSE(memo.find("t", text));
  CHECK(memo.find("t", text_of(tok, a)));
}

TEST_CASE("replies stay past 4096 others while the bytes allow, and their bytes leave with them",
          "[reply_memo]") {
  const model::Tokenizer tok = vocab();
  auto reply = [&](int i) { return tok.encode("reply " + std::to_string(i), false, false); };
  std::size_t expected = 0;
  ReplyMemo memo(std::size_t(64) << 20);  // the engine's budget (engine_impl.hpp)
  for (int i = 0; i < 5000; ++i) {
    const auto ids = reply(i);
    const std::string text = text_of(tok, ids);
    memo.remember(tok, "t", text, ids);
    expected += ReplyMemo::entry_bytes(3 + text.size(), ids.size());
  }
  CHECK(memo.size() == 5000);
  CHECK(memo.bytes() == expected);
  REQUIRE(memo.find("t", text_of(tok, reply(0))));  // the first, after 4999 others
  CHECK(*memo.find("t", text_of(tok, reply(0))) == reply(0));
  // The same reply again replaces its entry: no bytes counted twice.
  memo.remember(tok, "t", text_of(tok, reply(7)), reply(7));
  CHECK(memo.size() == 5000);
  CHECK(memo.bytes() == expected);

  // A budget of three replies keeps the three most recently used.
  const std::size_t three = ReplyMemo::entry_bytes(3 + text_of(tok, reply(1)).size(), reply(1).size()) * 3;
  ReplyMemo small(three);
  for (int i = 1; i <= 4; ++i) small.remember(tok, "t", text_of(tok, reply(i)), reply(i));
  CHECK(small.size() == 3);
  CHECK(small.bytes() == three);
  CHECK_FALSE(small.find("t", text_of(tok, reply(1))));
  CHECK(small.find("t", text_of(tok, reply(2))));  // now the most recent: 3 leaves next
  small.remember(tok, "t", text_of(tok, reply(5)), reply(5));
  CHECK_FALSE(small.find("t", text_of(tok, reply(3))));
  CHECK(small.find("t", text_of(tok, reply(2))));
  // A reply larger than the whole budget is not remembered and pushes nothing out.
  const auto long_ids = tok.encode(std::string(4000, 'x'), false, false);
  small.remember(tok, "t", text_of(tok, long_ids), long_ids);
  CHECK(small.size() == 3);
  CHECK(small.bytes() == three);
}
