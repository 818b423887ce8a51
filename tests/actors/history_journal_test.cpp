// The history journal (invariant 4): acknowledged turns replay exactly after
// a restart; a torn tail is dropped cleanly; tombstones delete; compaction
// keeps every live conversation; corruption in the middle is refused (or the
// prefix kept, when asked); concurrent commits share their fsyncs.
#include "actors/history_journal.hpp"

#include "tests/temp_dir.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <unistd.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace asio = boost::asio;
using namespace pensieve;
using namespace pensieve::actors;

namespace {

struct Harness {
  asio::io_context io;
  std::shared_ptr<rt::IoRing> ring;
  Harness() {
    auto r = rt::IoRing::create(io.get_executor(), 64);
    if (!r) FAIL("io_uring: " << r.error().message);
    ring = *r;
  }
  Result<std::shared_ptr<HistoryJournal>> open(const std::filesystem::path& dir,
                                               std::uint64_t threshold = std::uint64_t{64} << 20,
                                               CorruptJournalPolicy policy = CorruptJournalPolicy::fail) {
    return HistoryJournal::open(ring, {.dir = dir, .compact_threshold_bytes = threshold, .on_corrupt = policy});
  }
  // Runs `task` to completion.
  void run(asio::awaitable<void> task) {
    bool finished = false;
    asio::co_spawn(io, std::move(task), [&](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
      finished = true;
    });
    io.restart();
    io.run();
    REQUIRE(finished);
  }
};

JournalTurn turn_of(std::uint64_t uid, const JournaledConversation& before, std::string user, std::int32_t seed) {
  JournalTurn t;
  t.uid = uid;
  t.last_active_unix_s = 1000 + seed;
  t.turns = before.turns + 1;
  t.messages_before = std::uint32_t(before.messages.size());
  t.tokens_before = std::uint32_t(before.tokens.size());
  t.messages = {{"user", std::move(user)}, {"assistant", "reply " + std::to_string(seed)}};
  for (std::int32_t i = 0; i < 5 + seed % 7; ++i) t.tokens.push_back(seed * 100 + i);
  return t;
}

// Builds the expected state alongside the journal: commits `record` and
// applies it to `model`.
// Pass named records: GCC 12 mishandles temporaries in co_await.
asio::awaitable<void> commit(HistoryJournal& j, ConversationsByUid& model, const JournalRecord& record) {
  REQUIRE_FALSE(apply_record(model, record).has_value());
  const Result<void> r = co_await j.commit(record);
  if (!r) FAIL(r.error().message);
}

// A few conversations with a few turns each.
asio::awaitable<void> write_history(HistoryJournal& j, ConversationsByUid& model, int conversations, int turns,
                                    std::uint64_t first_uid = 0xabc000) {
  for (int c = 0; c < conversations; ++c) {
    const std::uint64_t uid = first_uid + std::uint64_t(c);
    const JournalRecord create = JournalCreate{uid, "tenant" + std::to_string(c % 2), "conv" + std::to_string(c), 500 + c};
    co_await commit(j, model, create);
    for (int t = 0; t < turns; ++t) {
      const JournalRecord turn = turn_of(uid, model.at(uid), "question " + std::to_string(t), c * 10 + t);
      co_await commit(j, model, turn);
    }
  }
}

void check_same(const ConversationsByUid& got, const ConversationsByUid& want) {
  REQUIRE(got.size() == want.size());
  for (const auto& [uid, w] : want) {
    REQUIRE(got.contains(uid));
    const auto& g = got.at(uid);
    CHECK(g.tenant == w.tenant);
    CHECK(g.id == w.id);
    CHECK(g.created_unix_s == w.created_unix_s);
    CHECK(g.last_active_unix_s == w.last_active_unix_s);
    CHECK(g.turns == w.turns);
    CHECK(g.tokens == w.tokens);
    REQUIRE(g.messages.size() == w.messages.size());
    for (std::size_t i = 0; i < w.messages.size(); ++i) {
      CHECK(g.messages[i].role == w.messages[i].role);
      CHECK(g.messages[i].content == w.messages[i].content);
    }
  }
}

std::uintmax_t size_of(const std::filesystem::path& p) { return std::filesystem::file_size(p); }

void append_bytes(const std::filesystem::path& p, const std::vector<std::byte>& bytes) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_APPEND);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size()));
  ::close(fd);
}

}  // namespace

TEST_CASE("committed conversations and turns replay exactly after reopening", "[journal]") {
  pensieve::testing::TempDir dir("journal");
  Harness h;
  ConversationsByUid model;
  {
    auto j = h.open(dir.path());
    REQUIRE(j.has_value());
    CHECK((*j)->recovered().empty());
    h.run(write_history(**j, model, 3, 4));
  }
  auto again = h.open(dir.path());
  REQUIRE(again.has_value());
  CHECK((*again)->open_report().records == 3 * 5);
  CHECK((*again)->open_report().torn_tail_bytes == 0);
  CHECK_FALSE((*again)->open_report().rewritten);
  check_same((*again)->recovered(), model);
  // And it goes on from there.
  h.run([&]() -> asio::awaitable<void> {
    const JournalRecord more = turn_of(0xabc001, model.at(0xabc001), "more", 77);
    co_await commit(**again, model, more);
  }());
  again->reset();
  auto third = h.open(dir.path());
  REQUIRE(third.has_value());
  check_same((*third)->recovered(), model);
}

TEST_CASE("a torn tail is dropped, the rest replays and the journal goes on", "[journal]") {
  pensieve::testing::TempDir dir("journal");
  Harness h;
  ConversationsByUid model;
  {
    auto j = h.open(dir.path());
    REQUIRE(j.has_value());
    h.run(write_history(**j, model, 2, 2));
  }
  const auto path = dir.path() / HistoryJournal::file_name;
  const auto intact = size_of(path);
  std::size_t appended = 0;

  SECTION("a record cut short") {
    // A record as the crash left it: its header and part of its payload.
    std::vector<std::byte> record;
    encode_record(turn_of(0xabc000, model.at(0xabc000), "lost", 9), record);
    record.resize(record.size() - 3);
    append_bytes(path, record);
    appended = record.size();
  }
  SECTION("a record whose checksum fails at the very end") {
    std::vector<std::byte> record;
    encode_record(turn_of(0xabc000, model.at(0xabc000), "lost", 9), record);
    record.back() ^= std::byte{0xff};
    append_bytes(path, record);
    appended = record.size();
  }
  SECTION("zeros the filesystem allocated but the write never filled") {
    append_bytes(path, std::vector<std::byte>(300));
    appended = 300;
  }
  auto j = h.open(dir.path());
  REQUIRE(j.has_value());
  CHECK((*j)->open_report().torn_tail_bytes == appended);
  CHECK((*j)->open_report().rewritten);
  CHECK(size_of(path) <= intact);  // rewritten from the replayed conversations, compacted
  check_same((*j)->recovered(), model);
  h.run([&]() -> asio::awaitable<void> {
    const JournalRecord after = turn_of(0xabc000, model.at(0xabc000), "after", 10);
    co_await commit(**j, model, after);
  }());
  j->reset();
  auto again = h.open(dir.path());
  REQUIRE(again.has_value());
  CHECK((*again)->open_report().torn_tail_bytes == 0);
  check_same((*again)->recovered(), model);
}

TEST_CASE("tombstones delete, and a turn finishing after its delete is dropped", "[journal]") {
  pensieve::testing::TempDir dir("journal");
  Harness h;
  ConversationsByUid model;
  {
    auto j = h.open(dir.path());
    REQUIRE(j.has_value());
    h.run([&]() -> asio::awaitable<void> {
      co_await write_history(**j, model, 3, 1);
      const JournalRecord late = turn_of(0xabc001, model.at(0xabc001), "late", 5);
      const JournalRecord remove = JournalRemove{0xabc001};
      co_await commit(**j, model, remove);
      // The turn ran while the conversation was deleted: acknowledged, not kept.
      const Result<void> r = co_await (*j)->commit(late);
      CHECK(r.has_value());
      // The same client id again, a new incarnation.
      const JournalRecord again = JournalCreate{0xdef001, "tenant1", "conv1", 900};
      co_await commit(**j, model, again);
    }());
  }
  auto j = h.open(dir.path());
  REQUIRE(j.has_value());
  check_same((*j)->recovered(), model);
  CHECK_FALSE((*j)->recovered().contains(0xabc001));
  CHECK((*j)->recovered().at(0xdef001).tokens.empty());
}

TEST_CASE("compaction past the threshold keeps every live conversation and shrinks the file", "[journal]") {
  pensieve::testing::TempDir dir("journal");
  Harness h;
  ConversationsByUid model;
  std::uint64_t before = 0;
  {
    auto j = h.open(dir.path(), 4096);
    REQUIRE(j.has_value());
    h.run([&]() -> asio::awaitable<void> {
      co_await write_history(**j, model, 6, 6);
      for (std::uint64_t c = 0; c < 5; ++c) {
        const JournalRecord remove = JournalRemove{0xabc000 + c};
        co_await commit(**j, model, remove);
      }
      before = (*j)->file_bytes();
    }());
    CHECK((*j)->compactions() > 0);
  }
  const auto path = dir.path() / HistoryJournal::file_name;
  CHECK(size_of(path) == before);
  auto j = h.open(dir.path(), 4096);
  REQUIRE(j.has_value());
  check_same((*j)->recovered(), model);
  CHECK(model.size() == 1);
  CHECK_FALSE(std::filesystem::exists(path.string() + ".tmp"));
}

TEST_CASE("a corrupt record in the middle fails open, or keeps the prefix when asked", "[journal]") {
  pensieve::testing::TempDir dir("journal");
  Harness h;
  ConversationsByUid model;
  ConversationsByUid prefix;
  std::uint64_t first_two = 0;
  {
    auto j = h.open(dir.path());
    REQUIRE(j.has_value());
    h.run([&]() -> asio::awaitable<void> {
      co_await write_history(**j, model, 1, 1);
      prefix = model;
      first_two = (*j)->file_bytes();
      co_await write_history(**j, model, 3, 2, 0xbbb000);
    }());
  }
  // Damage the first record after the prefix; good records follow it.
  const auto path = dir.path() / HistoryJournal::file_name;
  {
    const int fd = ::open(path.c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    std::byte b{};
    const off_t victim = off_t(first_two) + 20;  // inside the next record's payload
    REQUIRE(::pread(fd, &b, 1, victim) == 1);
    b ^= std::byte{0x40};
    REQUIRE(::pwrite(fd, &b, 1, victim) == 1);
    ::close(fd);
  }
  auto refused = h.open(dir.path());
  REQUIRE_FALSE(refused.has_value());
  CHECK_THAT(refused.error().message, Catch::Contains("corrupt at byte " + std::to_string(first_two)));
  CHECK(std::filesystem::exists(path));

  auto kept = h.open(dir.path(), std::uint64_t{64} << 20, CorruptJournalPolicy::keep_prefix);
  REQUIRE(kept.has_value());
  REQUIRE((*kept)->open_report().corruption.has_value());
  CHECK(std::filesystem::exists((*kept)->open_report().moved_aside));
  check_same((*kept)->recovered(), prefix);
}

TEST_CASE("concurrent commits share one write and fsync", "[journal]") {
  pensieve::testing::TempDir dir("journal");
  Harness h;
  auto j = h.open(dir.path());
  REQUIRE(j.has_value());
  constexpr int n = 16;
  int done = 0;
  for (int i = 0; i < n; ++i) {
    asio::co_spawn(
        h.io,
        [&, i]() -> asio::awaitable<void> {
          const JournalRecord create = JournalCreate{std::uint64_t(i + 1), "t", "c" + std::to_string(i), i};
          const Result<void> r = co_await (*j)->commit(create);
          CHECK(r.has_value());
          ++done;
        },
        asio::detached);
  }
  h.io.run();
  CHECK(done == n);
  // The first commit's sync may go out alone; every later one joins one batch.
  CHECK((*j)->syncs() <= 2);
  CHECK((*j)->syncs() >= 1);
  j->reset();
  auto again = h.open(dir.path());
  REQUIRE(again.has_value());
  CHECK((*again)->recovered().size() == std::size_t(n));
}

TEST_CASE("a record that passes its checksum but does not fit its history is corruption", "[journal]") {
  std::vector<std::byte> file = encode_file_header();
  encode_record(JournalCreate{1, "t", "a", 1}, file);
  const std::size_t good = file.size();
  JournalTurn t;
  t.uid = 1;
  t.tokens_before = 3;  // the history is empty
  t.tokens = {1, 2};
  encode_record(t, file);
  const ReplayOutcome out = replay_journal(file);
  REQUIRE(out.corruption.has_value());
  CHECK(out.valid_bytes == good);
  CHECK(out.records == 1);
  CHECK(out.conversations.size() == 1);
}

// Found by the journal fuzzer (tests/actors/fuzz/fuzz_history_journal.cpp,
// 2026-12-01): a conversation whose only turn record added nothing kept its
// last activity in replay but lost it when compaction rewrote it.
TEST_CASE("a conversation rewritten by compaction keeps its last activity even when no turn added to it",
          "[journal]") {
  std::vector<std::byte> file = encode_file_header();
  encode_record(JournalCreate{5, "t", "c", 10}, file);
  JournalTurn t;
  t.uid = 5;
  t.last_active_unix_s = 99;  // no messages, no tokens, no turn counted
  encode_record(t, file);
  const ReplayOutcome out = replay_journal(file);
  REQUIRE_FALSE(out.corruption.has_value());
  REQUIRE(out.conversations.size() == 1);
  CHECK(out.conversations.at(5).last_active_unix_s == 99);
  std::vector<std::byte> compacted = encode_file_header();
  encode_conversation(out.conversations.at(5), compacted);
  const ReplayOutcome back = replay_journal(compacted);
  REQUIRE_FALSE(back.corruption.has_value());
  REQUIRE(back.conversations.size() == 1);
  CHECK(back.conversations.at(5).created_unix_s == 10);
  CHECK(back.conversations.at(5).last_active_unix_s == 99);
}

TEST_CASE("tool messages and a re-rendered history replay exactly", "[journal]") {
  std::vector<std::byte> file = encode_file_header();
  encode_record(JournalCreate{7, "t", "tools", 1}, file);
  JournalTurn first;
  first.uid = 7;
  first.turns = 1;
  model::ChatMessage call{"assistant", ""};
  call.tool_calls = R"([{"id":"c1","type":"function","function":{"name":"add","arguments":"{}"}}])";
  first.messages = {{"user", "add"}, call};
  first.tokens = {1, 2, 3, 4};
  encode_record(first, file);
  // The template rendered the conversation anew: tokens from 2 on replaced.
  JournalTurn second;
  second.uid = 7;
  second.turns = 2;
  second.messages_before = 2;
  second.tokens_before = 2;
  second.retokenized = true;
  model::ChatMessage result{"tool", "5"};
  result.tool_call_id = "c1";
  result.name = "add";
  second.messages = {result, {"assistant", "five"}};
  second.tokens = {9, 8, 7};
  encode_record(second, file);
  const ReplayOutcome out = replay_journal(file);
  REQUIRE_FALSE(out.corruption.has_value());
  const JournaledConversation& c = out.conversations.at(7);
  CHECK(c.tokens == std::vector<std::int32_t>{1, 2, 9, 8, 7});
  REQUIRE(c.messages.size() == 4);
  CHECK(c.messages[1].tool_calls == call.tool_calls);
  CHECK(c.messages[2].tool_call_id == "c1");
  CHECK(c.messages[2].name == "add");
  // A re-rendered turn may not claim more tokens than the history has.
  std::vector<std::byte> bad = encode_file_header();
  encode_record(JournalCreate{8, "t", "x", 1}, bad);
  JournalTurn over;
  over.uid = 8;
  over.tokens_before = 1;
  over.retokenized = true;
  over.tokens = {5};
  encode_record(over, bad);
  CHECK(replay_journal(bad).corruption.has_value());
}

TEST_CASE("an edited history's turn replaces the messages and tokens past its kept prefix", "[journal]") {
  std::vector<std::byte> file = encode_file_header();
  encode_record(JournalCreate{9, "t", "edited", 1}, file);
  JournalTurn first;
  first.uid = 9;
  first.turns = 2;
  first.messages = {{"user", "a"}, {"assistant", "b"}, {"user", "c"}, {"assistant", "d"}};
  first.tokens = {1, 2, 3, 4, 5, 6};
  encode_record(first, file);
  JournalTurn edit;  // the client edited "c": kept 2 messages and 3 tokens
  edit.uid = 9;
  edit.turns = 3;
  edit.messages_before = 2;
  edit.tokens_before = 3;
  edit.retokenized = true;
  edit.messages_replaced = true;
  edit.messages = {{"user", "C"}, {"assistant", "D"}};
  edit.tokens = {7, 8};
  encode_record(edit, file);
  const ReplayOutcome out = replay_journal(file);
  REQUIRE_FALSE(out.corruption.has_value());
  const JournaledConversation& c = out.conversations.at(9);
  CHECK(c.tokens == std::vector<std::int32_t>{1, 2, 3, 7, 8});
  REQUIRE(c.messages.size() == 4);
  CHECK(c.messages[1].content == "b");
  CHECK(c.messages[2].content == "C");
  CHECK(c.turns == 3);
  // Without the flag, a turn must extend the whole history.
  std::vector<std::byte> bad = encode_file_header();
  encode_record(JournalCreate{9, "t", "edited", 1}, bad);
  encode_record(first, bad);
  edit.messages_replaced = false;
  encode_record(edit, bad);
  CHECK(replay_journal(bad).corruption.has_value());
}

namespace {

JournalModel model_named(std::string name, std::uint64_t tensors) {
  return JournalModel{"llama", std::move(name), tensors, 0x22, 0x33};
}

Result<std::shared_ptr<HistoryJournal>> open_for(Harness& h, const std::filesystem::path& dir, const JournalModel& m,
                                                 bool reset = false) {
  return HistoryJournal::open(h.ring, {.dir = dir, .model = m, .reset_on_model_change = reset});
}

std::vector<std::byte> file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

}  // namespace

TEST_CASE("a journal records its model and refuses another one, naming both, unless told to reset",
          "[journal][model]") {
  Harness h;
  pensieve::testing::TempDir dir("journal-model");
  const JournalModel a = model_named("a", 0x11);
  const JournalModel b = model_named("b", 0x12);
  {
    auto j = open_for(h, dir.path(), a);
    REQUIRE(j.has_value());
    const JournalRecord create = JournalCreate{0xabc, "t", "c", 5};
    h.run([&]() -> asio::awaitable<void> {
      const Result<void> r = co_await (*j)->commit(create);
      CHECK(r.has_value());
    }());
  }
  const auto path = dir.path() / HistoryJournal::file_name;
  const ReplayOutcome written = replay_journal(file_bytes(path));
  REQUIRE(written.model.has_value());
  CHECK(same_model(*written.model, a));
  CHECK(written.model->name == "a");
  {
    auto same = open_for(h, dir.path(), a);
    REQUIRE(same.has_value());
    CHECK((*same)->recovered().size() == 1);
    // The name is for messages: the same model under another name is the same.
    auto renamed = open_for(h, dir.path(), model_named("a2", 0x11));
    REQUIRE(renamed.has_value());
  }
  auto refused = open_for(h, dir.path(), b);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().message ==
        "history journal " + path.string() +
            " holds the conversations of model 'a' (architecture llama, tensors 0000000000000011, tokenizer "
            "0000000000000022, chat template 0000000000000033); the loaded model is 'b' (architecture llama, "
            "tensors 0000000000000012, tokenizer 0000000000000022, chat template 0000000000000033) "
            "(--history-reset-on-model-change starts without that history)");
  // Refusing changed nothing: the first model still finds its history.
  {
    auto again = open_for(h, dir.path(), a);
    REQUIRE(again.has_value());
    CHECK((*again)->recovered().size() == 1);
  }
  {
    auto reset = open_for(h, dir.path(), b, true);
    REQUIRE(reset.has_value());
    CHECK((*reset)->recovered().empty());
    REQUIRE((*reset)->open_report().model_reset.has_value());
    CHECK_THAT(*(*reset)->open_report().model_reset, Catch::Contains("the loaded model is 'b'"));
    CHECK_THAT(*(*reset)->open_report().model_reset, Catch::EndsWith(" and the history starts empty"));
  }
  // The old history was moved aside, not deleted; the journal is now b's.
  std::size_t aside = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    if (entry.path().filename().string().starts_with("history.journal.model-")) {
      ++aside;
      CHECK(replay_journal(file_bytes(entry.path())).conversations.size() == 1);
    }
  }
  CHECK(aside == 1);
  CHECK(open_for(h, dir.path(), b).has_value());
  CHECK_FALSE(open_for(h, dir.path(), a).has_value());
}

TEST_CASE("a journal written before model records loads for any model and gets the record", "[journal][model]") {
  Harness h;
  pensieve::testing::TempDir dir("journal-model");
  std::vector<std::byte> old = encode_file_header();
  encode_record(JournalCreate{0x77, "t", "old", 3}, old);
  JournalTurn t;
  t.uid = 0x77;
  t.turns = 1;
  t.messages = {{"user", "hi"}, {"assistant", "hello"}};
  t.tokens = {1, 2, 3};
  encode_record(t, old);
  const auto path = dir.path() / HistoryJournal::file_name;
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(old.data()), std::streamsize(old.size()));
  }
  REQUIRE_FALSE(replay_journal(old).model.has_value());
  const JournalModel a = model_named("a", 0x11);
  {
    auto j = open_for(h, dir.path(), a);
    REQUIRE(j.has_value());
    REQUIRE((*j)->recovered().size() == 1);
    CHECK((*j)->recovered().at(0x77).tokens == std::vector<std::int32_t>{1, 2, 3});
    CHECK((*j)->open_report().rewritten);
  }
  const ReplayOutcome now = replay_journal(file_bytes(path));
  REQUIRE(now.model.has_value());
  CHECK(same_model(*now.model, a));
  CHECK(now.conversations.at(0x77).messages.size() == 2);
  CHECK_FALSE(open_for(h, dir.path(), model_named("b", 0x12)).has_value());
}

TEST_CASE("a released history leaves the journal's memory and loads back from its file, across compactions",
          "[journal][release]") {
  pensieve::testing::TempDir dir("journal");
  Harness h;
  ConversationsByUid model;
  auto j = h.open(dir.path(), 1024);  // compacts once the file passes 1 KiB (and twice its last size)
  REQUIRE(j.has_value());
  h.run(write_history(**j, model, 4, 3));
  std::size_t all_tokens = 0, all_messages = 0;
  for (const auto& [uid, c] : model) {
    all_tokens += c.tokens.size();
    all_messages += c.messages.size();
  }
  REQUIRE(all_tokens > 0);
  CHECK((*j)->held_tokens() == all_tokens);
  CHECK((*j)->held_messages() == all_messages);
  // Three of the four leave memory: the journal keeps only the fourth's history.
  const std::uint64_t kept = 0xabc003;
  for (std::uint64_t uid = 0xabc000; uid < kept; ++uid) (*j)->release(uid);
  CHECK((*j)->released() == 3);
  CHECK((*j)->held_tokens() == model.at(kept).tokens.size());
  CHECK((*j)->held_messages() == model.at(kept).messages.size());
  CHECK((*j)->find(0xabc000)->id == "conv0");  // its name stays
  CHECK((*j)->find(0xabc000)->tokens.empty());
  // Compactions while three are released: each is read back, written and let go again.
  const std::size_t compactions = (*j)->compactions();
  h.run([&]() -> asio::awaitable<void> {
    for (int t = 0; t < 24; ++t) {
      const JournalRecord turn = turn_of(kept, model.at(kept), "more " + std::to_string(t), 40 + t);
      co_await commit(**j, model, turn);
    }
  }());
  CHECK((*j)->compactions() > compactions);
  CHECK((*j)->released() == 3);
  CHECK((*j)->held_tokens() == model.at(kept).tokens.size());
  // A released one loads back whole (and is held again), and takes a turn.
  auto loaded = (*j)->load(0xabc001);
  REQUIRE(loaded.has_value());
  REQUIRE(*loaded != nullptr);
  CHECK((*loaded)->tokens == model.at(0xabc001).tokens);
  CHECK((*loaded)->turns == model.at(0xabc001).turns);
  CHECK((*j)->released() == 2);
  h.run([&]() -> asio::awaitable<void> {
    const JournalRecord turn = turn_of(0xabc001, model.at(0xabc001), "back again", 77);
    co_await commit(**j, model, turn);
    // A turn of a released one (its reload raced its release) is checked against its history read back.
    const JournalRecord late = turn_of(0xabc002, model.at(0xabc002), "late", 78);
    co_await commit(**j, model, late);
  }());
  CHECK((*j)->released() == 1);
  j->reset();
  auto again = h.open(dir.path(), 1024);  // past the threshold: rewritten at open
  REQUIRE(again.has_value());
  CHECK((*again)->open_report().rewritten);
  check_same((*again)->recovered(), model);
  // Released at once after reopening (as the engine does), each loads back exactly.
  for (const auto& [uid, c] : model) (*again)->release(uid);
  CHECK((*again)->held_tokens() == 0);
  CHECK((*again)->held_messages() == 0);
  for (const auto& [uid, c] : model) {
    auto back = (*again)->load(uid);
    REQUIRE(back.has_value());
    REQUIRE(*back != nullptr);
    CHECK((*back)->tokens == c.tokens);
    CHECK((*back)->messages.size() == c.messages.size());
  }
}
