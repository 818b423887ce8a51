// libFuzzer target: any bytes as a history journal file, through the replay
// that Engine start-up runs (actors/history_record.hpp). The input's first
// byte picks a mode: odd, the rest is taken as is; even, every framed record
// in it gets its checksum recomputed first, so the fuzzer reaches the record
// decoder and the replay rules and not only the checksum test. Replay must
// then account for every byte (replayed, torn tail, or corruption), and what
// it recovered must encode and replay back to the same conversations.
#include "actors/history_record.hpp"
#include "tests/gpu/fuzz/seed_hook.hpp"

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

using namespace pensieve::actors;

void check(bool ok) {
  if (!ok) std::abort();  // a broken invariant: libFuzzer keeps the input
}

// Recomputes the CRC of every record whose length fits in what follows.
void fix_checksums(std::vector<std::byte>& file) {
  std::size_t at = journal_file_header_bytes;
  while (at + journal_record_header_bytes <= file.size()) {
    std::uint32_t length = 0;
    std::memcpy(&length, file.data() + at, 4);
    const std::size_t room = file.size() - at - journal_record_header_bytes;
    if (length == 0 || length > room) return;
    const auto crc = std::uint32_t(
        crc32_z(0, reinterpret_cast<const Bytef*>(file.data() + at + journal_record_header_bytes), length));
    std::memcpy(file.data() + at + 4, &crc, 4);
    at += journal_record_header_bytes + length;
  }
}

bool same(const JournaledConversation& a, const JournaledConversation& b) {
  if (a.uid != b.uid || a.tenant != b.tenant || a.id != b.id || a.created_unix_s != b.created_unix_s ||
      a.turns != b.turns || a.tokens != b.tokens || a.messages.size() != b.messages.size()) {
    return false;
  }
  // A conversation with no turn keeps its creation time as its last activity.
  if (a.last_active_unix_s != b.last_active_unix_s) return false;
  for (std::size_t i = 0; i < a.messages.size(); ++i) {
    if (a.messages[i].role != b.messages[i].role || a.messages[i].content != b.messages[i].content) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::vector<std::byte> file(size - 1);  // a private copy (ASan redzone)
  if (size > 1) std::memcpy(file.data(), data + 1, size - 1);
  if ((data[0] & 1) == 0) fix_checksums(file);
  const ReplayOutcome out = replay_journal(file);
  check(out.valid_bytes <= file.size());
  check(out.valid_bytes + out.torn_tail_bytes <= file.size());
  if (!out.corruption) check(out.valid_bytes + out.torn_tail_bytes == file.size());
  // What was recovered writes back as a journal that replays to itself.
  std::vector<std::byte> again = encode_file_header();
  for (const auto& [uid, c] : out.conversations) {
    check(uid == c.uid);
    encode_conversation(c, again);
  }
  const ReplayOutcome back = replay_journal(again);
  check(!back.corruption && back.torn_tail_bytes == 0 && back.valid_bytes == again.size());
  check(back.conversations.size() == out.conversations.size());
  for (const auto& [uid, c] : out.conversations) {
    auto it = back.conversations.find(uid);
    check(it != back.conversations.end() && same(c, it->second));
  }
  return 0;
}

// Writes the seed corpus into dir: journals that replay, one with a torn
// tail, and one that is corrupt (each behind the mode byte).
int pensieve_fuzz_write_seeds(const std::string& dir) {
  auto write = [&](const std::string& name, char mode, const std::vector<std::byte>& bytes) {
    std::ofstream f(dir + "/" + name, std::ios::binary);
    f.put(mode);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  };
  std::vector<std::byte> j = encode_file_header();
  encode_record(JournalCreate{11, "tenant", "c1", 1700000000}, j);
  encode_record(JournalTurn{11, 1700000005, 1, 0, 0, {{"user", "Hi"}, {"assistant", "Hello"}}, {1, 15043, 2}}, j);
  encode_record(JournalCreate{13, "tenant", "c2", 1700000001}, j);
  encode_record(JournalTurn{11, 1700000009, 2, 2, 3, {{"user", "More"}, {"assistant", "Yes"}}, {4, 5}}, j);
  encode_record(JournalRemove{13}, j);
  write("replays", 1, j);
  write("replays-fixed", 0, j);
  std::vector<std::byte> torn = j;
  torn.resize(torn.size() - 3);
  write("torn", 1, torn);
  std::vector<std::byte> bad = j;
  bad[journal_file_header_bytes + 12] ^= std::byte{0x40};
  write("corrupt", 1, bad);
  write("empty-journal", 1, encode_file_header());
  // A turn that adds nothing but its time (tests/actors/history_journal_test.cpp).
  std::vector<std::byte> idle = encode_file_header();
  encode_record(JournalCreate{5, "t", "c", 10}, idle);
  encode_record(JournalTurn{5, 99, 0, 0, 0, {}, {}}, idle);
  write("untouched-turn", 1, idle);
  return 0;
}
