// Loading conversations for pensieve-bench.
#include "bench/pensieve-bench/dataset.hpp"
#include "tests/shared_data.hpp"

#include <catch2/catch.hpp>

using namespace pensieve::bench;

TEST_CASE("a JSONL file of conversations loads in order, skipping blank lines", "[bench]") {
  const std::string text =
      R"({"id":"one","turns":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]})"
      "\n\n"
      R"({"id":"two","source":"x","turns":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},)"
      R"({"role":"user","content":"c"}]})"
      "\r\n";
  auto d = parse_dataset(text, "mem.jsonl");
  REQUIRE(d.has_value());
  REQUIRE(d->size() == 2);
  CHECK((*d)[0].id == "one");
  CHECK((*d)[1].turns.size() == 3);
  CHECK((*d)[1].turns[2].content == "c");
}

TEST_CASE("a malformed line is named by file and line number", "[bench]") {
  const std::string good = R"({"id":"one","turns":[{"role":"user","content":"hi"}]})";
  auto message = [](const std::string& text) {
    auto d = parse_dataset(text, "chats.jsonl");
    REQUIRE_FALSE(d.has_value());
    return d.error().message;
  };
  CHECK(message(good + "\n{\"id\": \"two\", \"turns\": [}\n").rfind("chats.jsonl:2: not valid JSON", 0) == 0);
  CHECK(message(good + "\n\n" + R"({"turns":[]})") == "chats.jsonl:3: 'id' is missing or not a string");
  CHECK(message(R"({"id":"x","turns":[{"role":"bot","content":"a"}]})") ==
        "chats.jsonl:1: turns[0].role 'bot' is not user, assistant or system");
  CHECK(message(R"({"id":"x","turns":[{"role":"assistant","content":"a"}]})") ==
        "chats.jsonl:1: the conversation has no user message");
  CHECK(message(R"({"id":"x","turns":[{"role":"user"}]})") ==
        "chats.jsonl:1: turns[0] must be {\"role\": string, \"content\": string}");
  CHECK(message("\n\n") == "chats.jsonl: no conversations");
  auto missing = load_dataset("/nonexistent/chats.jsonl");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().message == "/nonexistent/chats.jsonl: cannot open");
}

TEST_CASE("the shared real conversations load", "[bench]") {
  auto d = load_dataset(pensieve::testing::shared_file("data/oasst.jsonl").string());
  REQUIRE(d.has_value());
  CHECK(d->size() == 226);
  CHECK(d->front().turns.front().role == "user");
}
