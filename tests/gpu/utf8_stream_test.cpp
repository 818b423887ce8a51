// The streaming UTF-8 decoder never hands out half a character.
#include "gpu/text/unicode_tables.hpp"
#include "gpu/text/utf8_stream.hpp"

#include <catch2/catch.hpp>

using namespace pensieve::model;

namespace {
const std::string replacement = "\xef\xbf\xbd";
}

TEST_CASE("ASCII passes through at once") {
  Utf8Stream s;
  CHECK(s.feed("Hello") == "Hello");
  CHECK(s.pending_bytes() == 0);
  CHECK(s.flush().empty());
}

TEST_CASE("a character split across pieces comes out when its last byte arrives") {
  Utf8Stream s;
  CHECK(s.feed("a\xc3") == "a");
  CHECK(s.pending_bytes() == 1);
  CHECK(s.feed("\xa9z") == "\xc3\xa9z");
  const std::string emoji = "\xf0\x9f\xa6\x99";  // 🦙
  for (std::size_t i = 0; i + 1 < emoji.size(); ++i) CHECK(s.feed(emoji.substr(i, 1)).empty());
  CHECK(s.feed(emoji.substr(3)) == emoji);
}

TEST_CASE("every split of mixed text streams out whole characters only") {
  const std::string text = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z";  // a é € 😀 z
  for (std::size_t cut1 = 0; cut1 <= text.size(); ++cut1) {
    for (std::size_t cut2 = cut1; cut2 <= text.size(); ++cut2) {
      Utf8Stream s;
      const std::string c1 = s.feed(text.substr(0, cut1));
      const std::string c2 = s.feed(text.substr(cut1, cut2 - cut1));
      const std::string c3 = s.feed(text.substr(cut2));
      CHECK(unicode::is_valid_utf8(c1));
      CHECK(unicode::is_valid_utf8(c2));
      CHECK(unicode::is_valid_utf8(c3));
      CHECK(c1 + c2 + c3 + s.flush() == text);
    }
  }
}

TEST_CASE("bytes that cannot become a character turn into U+FFFD") {
  Utf8Stream s;
  CHECK(s.feed("\xff") == replacement);
  CHECK(s.feed("\xc3" "A") == replacement + "A");
  CHECK(s.feed("\x80") == replacement);
  CHECK(s.feed("\xed\xa0\x80") == replacement + replacement + replacement);  // a surrogate
  CHECK(s.feed("\xe0\x80") == replacement + replacement);  // an overlong
}

TEST_CASE("an unfinished character at the end of the stream is flushed as U+FFFD") {
  Utf8Stream s;
  CHECK(s.feed("ok\xe2\x82").size() == 2);
  CHECK(s.flush() == replacement);
  CHECK(s.pending_bytes() == 0);
  CHECK(s.flush().empty());
}
