// Invariant 4 through the Engine: with a history folder, a conversation and
// its acknowledged turns come back when the engine is destroyed and created
// again on the same folder, and the next turn gives the same tokens as an
// engine that never stopped. Deleted conversations stay deleted.
#include "actors/history_journal.hpp"
#include "tests/actors/engine_fixture.hpp"
#include "tests/tiny_model.hpp"

using namespace pensieve;
using namespace pensieve::testing;

namespace {

std::unique_ptr<actors::Engine> make_engine(const std::string& history_dir) {
  actors::EngineOptions o;
  o.n_threads = 2;
  o.kv_cache_mb = 16;
  o.history_dir = history_dir;
  return make_stories_engine(o);
}

}  // namespace

TEST_CASE("a conversation's history survives the engine, and its next turn continues exactly", "[engine][history]") {
  asio::io_context io;
  // The engine that never stops, without a journal.
  std::vector<std::vector<std::int32_t>> straight;
  actors::ConversationSnapshot straight_end;
  {
    auto e = make_engine("");
    REQUIRE(e->create_conversation("t", "c0").has_value());
    for (const auto& text : story_turns()) straight.push_back(run(io, greedy_turn_tokens(*e, "c0", text)));
    straight_end = run(io, require_snapshot(*e, "c0"));
  }

  TempDir dir("engine-history");
  const std::string history = (dir / "history").string();
  actors::ConversationSnapshot before;
  {
    auto e = make_engine(history);
    REQUIRE(e->create_conversation("t", "c0").has_value());
    REQUIRE(e->create_conversation("t", "gone").has_value());
    REQUIRE(e->create_conversation("t", "empty").has_value());
    for (std::size_t i = 0; i + 1 < story_turns().size(); ++i) {
      CHECK(run(io, greedy_turn_tokens(*e, "c0", story_turns()[i])) == straight[i]);
    }
    CHECK(e->delete_conversation("t", "gone"));
    before = run(io, require_snapshot(*e, "c0"));
  }  // destroyed: as after a crash, only the journal remains

  auto e = make_engine(history);
  CHECK(e->find_conversation("t", "c0").has_value());
  CHECK(e->find_conversation("t", "empty").has_value());
  CHECK_FALSE(e->find_conversation("t", "gone").has_value());
  const auto after = run(io, require_snapshot(*e, "c0"));
  CHECK(after.turns == 2);
  CHECK(after.tokens == before.tokens);
  REQUIRE(after.messages.size() == before.messages.size());
  for (std::size_t i = 0; i < before.messages.size(); ++i) {
    CHECK(after.messages[i].role == before.messages[i].role);
    CHECK(after.messages[i].content == before.messages[i].content);
  }
  // The KV is gone; the history is not: the next turn is the same.
  CHECK(run(io, greedy_turn_tokens(*e, "c0", story_turns().back())) == straight.back());
  const auto end = run(io, require_snapshot(*e, "c0"));
  CHECK(end.tokens == straight_end.tokens);
  CHECK(end.turns == 3);
}

TEST_CASE("a history folder holding a damaged journal stops the engine from starting", "[engine][history]") {
  TempDir dir("engine-history");
  const std::filesystem::path history = dir / "history";
  {
    auto e = make_engine(history.string());
    REQUIRE(e->create_conversation("t", "c0").has_value());
    REQUIRE(e->create_conversation("t", "c1").has_value());
  }
  // Flip a byte inside the first record (right after the 16-byte file header).
  const auto path = history / actors::HistoryJournal::file_name;
  REQUIRE(std::filesystem::file_size(path) > 40);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(24);
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x20);
    f.seekp(24);
    f.write(&c, 1);
  }
  actors::EngineOptions o;
  o.n_threads = 1;
  o.kv_cache_mb = 16;
  o.history_dir = history.string();
  auto refused = actors::Engine::create(stories_model(), o);
  REQUIRE_FALSE(refused.has_value());
  CHECK_THAT(refused.error().message, Catch::Contains("corrupt at byte 16"));
}

TEST_CASE("a history folder of another model is refused, naming both, or set aside with the reset option",
          "[engine][history]") {
  asio::io_context io;
  TempDir dir("engine-history");
  const std::string history = (dir / "history").string();
  {
    auto e = make_engine(history);
    REQUIRE(e->create_conversation("t", "c0").has_value());
    (void)run(io, greedy_turn_tokens(*e, "c0", story_turns()[0]));
    CHECK(e->history_note().empty());
  }
  actors::EngineOptions o;
  o.n_threads = 1;
  o.kv_cache_mb = 16;
  o.history_dir = history;
  auto refused = actors::Engine::create(tiny_model(), o);
  REQUIRE_FALSE(refused.has_value());
  CHECK_THAT(refused.error().message, Catch::Contains("stories260K.bin' (architecture llama, tensors "));
  CHECK_THAT(refused.error().message, Catch::Contains("; the loaded model is 'tiny' (architecture llama, "));
  CHECK_THAT(refused.error().message, Catch::EndsWith("(--history-reset-on-model-change starts without that history)"));
  // The same model on the same folder still finds its conversation.
  CHECK(make_engine(history)->find_conversation("t", "c0").has_value());

  o.history_reset_on_model_change = true;
  auto reset = actors::Engine::create(tiny_model(), o);
  REQUIRE(reset.has_value());
  CHECK_FALSE((*reset)->find_conversation("t", "c0").has_value());
  CHECK_THAT((*reset)->history_note(), Catch::EndsWith(" and the history starts empty"));
}
