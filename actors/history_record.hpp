#pragma once
// The records of the history journal (actors/history_journal.hpp), their
// byte format, and the replay state machine that turns a journal's bytes back
// into conversations. Pure: no I/O, no Asio.
//
// File format (version 1, little-endian):
//   file header: 8 bytes magic "PSVHJRN1", u32 version, u32 CRC-32 of the 12
//   bytes before it.
//   then records, each: u32 payload length, u32 CRC-32 (zlib) of the payload,
//   payload. A payload starts with a u8 type:
//     1 create: u64 uid, str tenant, str id, i64 created_unix_s
//     4 turn:   u64 uid, i64 last_active_unix_s, i32 turns (after it),
//               u32 messages before, u32 tokens before, u8 flags (bit 0:
//               the history's tokens from "tokens before" on are replaced;
//               bit 1: its messages from "messages before" on are),
//               u32 n + n x (str role, str content, str tool_calls,
//               str tool_call_id, str name), u32 n + n x i32 token
//     2 turn (older journals, read only): as 4 without the flags and with
//               (str role, str content) messages
//     3 remove: u64 uid (a tombstone)
//     5 model:  str architecture, str name, u64 tensor table hash, u64
//               tokenizer hash, u64 chat template hash: the model whose token
//               ids the records after it hold (first in a file that has it;
//               journals written before it existed have none)
//   str: u32 length + bytes. A conversation is named by its uid (random per
//   incarnation), so a turn that finishes after its conversation was deleted
//   and re-created under the same id can never be applied to the new one.
//
// Replay rule: records apply in order. A record that is cut short by the end
// of the file, or fails its checksum with nothing but zeros or the end of
// the file after it, is a torn tail (a write the crash interrupted; it was
// never acknowledged): replay stops before it, cleanly. A bad record with
// data after it, or a well-checksummed record that does not fit what came
// before (a turn for an unknown conversation, a turn whose "before" counts
// differ from the history), is corruption: replay stops there and reports
// it with its offset; the journal decides what to do (history_journal.hpp).
#include "gpu/text/chat_template.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace pensieve::actors {

struct JournalCreate {
  std::uint64_t uid = 0;
  std::string tenant;
  std::string id;
  std::int64_t created_unix_s = 0;
};

// What one turn added to its conversation.
struct JournalTurn {
  std::uint64_t uid = 0;
  std::int64_t last_active_unix_s = 0;
  std::int32_t turns = 0;               // the conversation's turn count after this one
  std::uint32_t messages_before = 0;    // the history this turn extends
  std::uint32_t tokens_before = 0;
  std::vector<model::ChatMessage> messages;  // appended
  std::vector<std::int32_t> tokens;          // appended
  // The template rendered the conversation anew: the history's tokens from
  // tokens_before on are replaced (not extended) by `tokens`.
  bool retokenized = false;
  // The client edited or cut the history, or it was truncated to fit the
  // context: its messages from messages_before on are replaced by `messages`.
  bool messages_replaced = false;
};

struct JournalRemove {
  std::uint64_t uid = 0;
};

// The model a journal's histories belong to (actors/model_identity.hpp).
struct JournalModel {
  std::string architecture;
  std::string name;  // for messages only: not part of the identity
  std::uint64_t tensors = 0;
  std::uint64_t tokenizer = 0;
  std::uint64_t chat_template = 0;
};

bool same_model(const JournalModel& a, const JournalModel& b);
// "'name' (architecture llama, tensors 0x..., tokenizer 0x..., chat template 0x...)"
std::string describe(const JournalModel& m);

using JournalRecord = std::variant<JournalCreate, JournalTurn, JournalRemove, JournalModel>;

// A conversation as replayed.
struct JournaledConversation {
  std::uint64_t uid = 0;
  std::string tenant;
  std::string id;
  std::int64_t created_unix_s = 0;
  std::int64_t last_active_unix_s = 0;
  std::int32_t turns = 0;
  std::vector<model::ChatMessage> messages;
  std::vector<std::int32_t> tokens;
};

using ConversationsByUid = std::map<std::uint64_t, JournaledConversation>;

inline constexpr std::size_t journal_file_header_bytes = 16;
inline constexpr std::size_t journal_record_header_bytes = 8;
inline constexpr std::uint32_t journal_max_record_bytes = std::uint32_t{1} << 30;

std::vector<std::byte> encode_file_header();
// Appends `record`, framed (length, checksum), to `out`.
void encode_record(const JournalRecord& record, std::vector<std::byte>& out);
// A whole journal file: the header, the model record when there is one,
// and the records of every conversation.
std::vector<std::byte> encode_journal(const ConversationsByUid& conversations, const std::optional<JournalModel>& model);
// The records that rebuild `conversation` from nothing: a create and, when
// it has turns, one turn holding its whole history.
void encode_conversation(const JournaledConversation& conversation, std::vector<std::byte>& out);

// Applies `record` to `conversations`; an error message when it does not fit.
std::optional<std::string> apply_record(ConversationsByUid& conversations, const JournalRecord& record);

// Where a conversation's records lie in a journal file: byte ranges, each
// holding one or more whole framed records, in order.
struct RecordSpan {
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};
using SpansByUid = std::map<std::uint64_t, std::vector<RecordSpan>>;

// The conversation `record` is about (0: a model record).
std::uint64_t record_uid(const JournalRecord& record);
// Applies the framed records in `bytes` (the contents of some of a
// file's spans, in order) to `conversations`; an error message when one is
// damaged or does not fit.
std::optional<std::string> apply_records(ConversationsByUid& conversations, std::span<const std::byte> bytes);

struct ReplayOutcome {
  ConversationsByUid conversations;
  SpansByUid spans;  // each replayed conversation's records in the file
  std::size_t records = 0;
  std::size_t valid_bytes = 0;       // the prefix that replayed (file header included)
  std::size_t torn_tail_bytes = 0;   // ignored after it (torn tail), 0 when none
  std::optional<std::string> corruption;  // set: replay stopped at valid_bytes for this reason
  std::optional<JournalModel> model;      // the file's model record; none in older journals
};

// Replays a whole journal file. An empty file replays as empty; a bad file
// header is corruption at offset 0.
ReplayOutcome replay_journal(std::span<const std::byte> file);

}  // namespace pensieve::actors
