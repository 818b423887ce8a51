#include "actors/history_record.hpp"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>

namespace pensieve::actors {
namespace {

constexpr char file_magic[8] = {'P', 'S', 'V', 'H', 'J', 'R', 'N', '1'};
constexpr std::uint32_t file_version = 1;

// turn_v1: what journals before tool messages hold (read, never written).
enum class RecordType : std::uint8_t { create = 1, turn_v1 = 2, remove = 3, turn = 4, model = 5 };

std::uint32_t crc_of(const std::byte* data, std::size_t n) {
  return static_cast<std::uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(data), n));
}

// Little-endian writer (the host is little-endian; static_assert below).
class Writer {
 public:
  explicit Writer(std::vector<std::byte>& out) : out_(out) {}
  template <class T>
  void put(T v) {
    const auto at = out_.size();
    out_.resize(at + sizeof v);
    std::memcpy(out_.data() + at, &v, sizeof v);
  }
  void put_string(const std::string& s) {
    put(std::uint32_t(s.size()));
    const auto at = out_.size();
    out_.resize(at + s.size());
    std::memcpy(out_.data() + at, s.data(), s.size());
  }
  void put_tokens(const std::vector<std::int32_t>& tokens) {
    put(std::uint32_t(tokens.size()));
    const auto at = out_.size();
    out_.resize(at + tokens.size() * sizeof(std::int32_t));
    if (!tokens.empty()) std::memcpy(out_.data() + at, tokens.data(), tokens.size() * sizeof(std::int32_t));
  }

 private:
  std::vector<std::byte>& out_;
};
static_assert(std::endian::native == std::endian::little, "the journal format is little-endian");

// Bounds-checked reader over one record's payload.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  template <class T>
  bool get(T& v) {
    if (in_.size() - at_ < sizeof v) return false;
    std::memcpy(&v, in_.data() + at_, sizeof v);
    at_ += sizeof v;
    return true;
  }
  bool get_string(std::string& s) {
    std::uint32_t n = 0;
    if (!get(n) || in_.size() - at_ < n) return false;
    s.assign(reinterpret_cast<const char*>(in_.data() + at_), n);
    at_ += n;
    return true;
  }
  bool get_tokens(std::vector<std::int32_t>& tokens) {
    std::uint32_t n = 0;
    if (!get(n) || (in_.size() - at_) / sizeof(std::int32_t) < n) return false;
    tokens.resize(n);
    if (n > 0) std::memcpy(tokens.data(), in_.data() + at_, n * sizeof(std::int32_t));
    at_ += n * sizeof(std::int32_t);
    return true;
  }
  bool done() const { return at_ == in_.size(); }

 private:
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
};

void encode_payload(const JournalRecord& record, Writer& w) {
  if (const auto* c = std::get_if<JournalCreate>(&record)) {
    w.put(RecordType::create);
    w.put(c->uid);
    w.put_string(c->tenant);
    w.put_string(c->id);
    w.put(c->created_unix_s);
  } else if (const auto* t = std::get_if<JournalTurn>(&record)) {
    w.put(RecordType::turn);
    w.put(t->uid);
    w.put(t->last_active_unix_s);
    w.put(t->turns);
    w.put(t->messages_before);
    w.put(t->tokens_before);
    w.put(std::uint8_t((t->retokenized ? 1 : 0) | (t->messages_replaced ? 2 : 0)));
    w.put(std::uint32_t(t->messages.size()));
    for (const auto& m : t->messages) {
      w.put_string(m.role);
      w.put_string(m.content);
      w.put_string(m.tool_calls);
      w.put_string(m.tool_call_id);
      w.put_string(m.name);
    }
    w.put_tokens(t->tokens);
  } else if (const auto* m = std::get_if<JournalModel>(&record)) {
    w.put(RecordType::model);
    w.put_string(m->architecture);
    w.put_string(m->name);
    w.put(m->tensors);
    w.put(m->tokenizer);
    w.put(m->chat_template);
  } else {
    w.put(RecordType::remove);
    w.put(std::get<JournalRemove>(record).uid);
  }
}

std::optional<JournalRecord> decode_payload(std::span<const std::byte> payload) {
  Reader r(payload);
  RecordType type{};
  if (!r.get(type)) return std::nullopt;
  switch (type) {
    case RecordType::create: {
      JournalCreate c;
      if (!r.get(c.uid) || !r.get_string(c.tenant) || !r.get_string(c.id) || !r.get(c.created_unix_s)) break;
      if (r.done()) return c;
      break;
    }
    case RecordType::turn_v1:
    case RecordType::turn: {
      const bool v1 = type == RecordType::turn_v1;
      JournalTurn t;
      std::uint32_t n = 0;
      std::uint8_t flags = 0;
      if (!r.get(t.uid) || !r.get(t.last_active_unix_s) || !r.get(t.turns) || !r.get(t.messages_before) ||
          !r.get(t.tokens_before) || (!v1 && !r.get(flags)) || flags > 3 || !r.get(n)) {
        break;
      }
      t.retokenized = (flags & 1) != 0;
      t.messages_replaced = (flags & 2) != 0;
      bool ok = true;
      for (std::uint32_t i = 0; ok && i < n; ++i) {
        model::ChatMessage m;
        ok = r.get_string(m.role) && r.get_string(m.content);
        if (ok && !v1) ok = r.get_string(m.tool_calls) && r.get_string(m.tool_call_id) && r.get_string(m.name);
        t.messages.push_back(std::move(m));
      }
      if (ok && r.get_tokens(t.tokens) && r.done()) return t;
      break;
    }
    case RecordType::remove: {
      JournalRemove d;
      if (r.get(d.uid) && r.done()) return d;
      break;
    }
    case RecordType::model: {
      JournalModel m;
      if (r.get_string(m.architecture) && r.get_string(m.name) && r.get(m.tensors) && r.get(m.tokenizer) &&
          r.get(m.chat_template) && r.done()) {
        return m;
      }
      break;
    }
  }
  return std::nullopt;
}

bool all_zero(std::span<const std::byte> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

}  // namespace

std::vector<std::byte> encode_file_header() {
  std::vector<std::byte> out;
  Writer w(out);
  for (char c : file_magic) w.put(c);
  w.put(file_version);
  w.put(crc_of(out.data(), out.size()));
  return out;
}

void encode_record(const JournalRecord& record, std::vector<std::byte>& out) {
  const std::size_t start = out.size();
  out.resize(start + journal_record_header_bytes);
  Writer w(out);
  encode_payload(record, w);
  const std::size_t payload = out.size() - start - journal_record_header_bytes;
  const auto length = std::uint32_t(payload);
  const std::uint32_t crc = crc_of(out.data() + start + journal_record_header_bytes, payload);
  std::memcpy(out.data() + start, &length, 4);
  std::memcpy(out.data() + start + 4, &crc, 4);
}

bool same_model(const JournalModel& a, const JournalModel& b) {
  return a.architecture == b.architecture && a.tensors == b.tensors && a.tokenizer == b.tokenizer &&
         a.chat_template == b.chat_template;
}

std::string describe(const JournalModel& m) {
  auto hex = [](std::uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return std::string(buf);
  };
  return "'" + m.name + "' (architecture " + m.architecture + ", tensors " + hex(m.tensors) + ", tokenizer " +
         hex(m.tokenizer) + ", chat template " + hex(m.chat_template) + ")";
}

std::vector<std::byte> encode_journal(const ConversationsByUid& conversations, const std::optional<JournalModel>& model) {
  std::vector<std::byte> out = encode_file_header();
  if (model) encode_record(*model, out);
  for (const auto& [uid, c] : conversations) encode_conversation(c, out);
  return out;
}

void encode_conversation(const JournaledConversation& c, std::vector<std::byte>& out) {
  encode_record(JournalCreate{c.uid, c.tenant, c.id, c.created_unix_s}, out);
  const bool untouched = c.turns == 0 && c.messages.empty() && c.tokens.empty() &&
                         c.last_active_unix_s == c.created_unix_s;
  if (untouched) return;  // the create record says it all
  encode_record(JournalTurn{c.uid, c.last_active_unix_s, c.turns, 0, 0, c.messages, c.tokens}, out);
}

std::optional<std::string> apply_record(ConversationsByUid& conversations, const JournalRecord& record) {
  if (const auto* c = std::get_if<JournalCreate>(&record)) {
    if (conversations.contains(c->uid)) return "conversation uid " + std::to_string(c->uid) + " created twice";
    conversations.emplace(c->uid, JournaledConversation{c->uid, c->tenant, c->id, c->created_unix_s,
                                                        c->created_unix_s, 0, {}, {}});
    return std::nullopt;
  }
  if (const auto* t = std::get_if<JournalTurn>(&record)) {
    auto it = conversations.find(t->uid);
    if (it == conversations.end()) return "a turn of unknown conversation uid " + std::to_string(t->uid);
    JournaledConversation& c = it->second;
    const bool tokens_fit =
        t->retokenized ? t->tokens_before <= c.tokens.size() : t->tokens_before == c.tokens.size();
    const bool messages_fit = t->messages_replaced ? t->messages_before <= c.messages.size()
                                                   : t->messages_before == c.messages.size();
    if (!messages_fit || !tokens_fit) {
      return "a turn of '" + c.id + "' extends " + std::to_string(t->tokens_before) + " tokens, the history has " +
             std::to_string(c.tokens.size());
    }
    c.tokens.resize(t->tokens_before);  // a re-rendered history replaces the rest
    c.messages.resize(t->messages_before);  // so does an edited one
    c.messages.insert(c.messages.end(), t->messages.begin(), t->messages.end());
    c.tokens.insert(c.tokens.end(), t->tokens.begin(), t->tokens.end());
    c.turns = t->turns;
    c.last_active_unix_s = t->last_active_unix_s;
    return std::nullopt;
  }
  if (const auto* d = std::get_if<JournalRemove>(&record)) {
    conversations.erase(d->uid);  // removing twice is harmless
  }
  return std::nullopt;  // a model record names the model; it changes no conversation
}

std::uint64_t record_uid(const JournalRecord& record) {
  return std::visit(
      [](const auto& r) -> std::uint64_t {
        if constexpr (requires { r.uid; }) {
          return r.uid;
        } else {
          return 0;
        }
      },
      record);
}

std::optional<std::string> apply_records(ConversationsByUid& conversations, std::span<const std::byte> bytes) {
  std::size_t at = 0;
  while (at < bytes.size()) {
    const auto rest = bytes.subspan(at);
    std::uint32_t length = 0;
    std::uint32_t crc = 0;
    if (rest.size() < journal_record_header_bytes) return "a record cut short at byte " + std::to_string(at);
    std::memcpy(&length, rest.data(), 4);
    std::memcpy(&crc, rest.data() + 4, 4);
    if (length == 0 || rest.size() - journal_record_header_bytes < length ||
        crc_of(rest.data() + journal_record_header_bytes, length) != crc) {
      return "a damaged record at byte " + std::to_string(at);
    }
    auto record = decode_payload(rest.subspan(journal_record_header_bytes, length));
    if (!record) return "a record that does not decode at byte " + std::to_string(at);
    if (auto problem = apply_record(conversations, *record)) return problem;
    at += journal_record_header_bytes + length;
  }
  return std::nullopt;
}

ReplayOutcome replay_journal(std::span<const std::byte> file) {
  ReplayOutcome out;
  if (file.empty()) return out;
  const auto header = encode_file_header();
  if (file.size() < header.size()) {
    out.torn_tail_bytes = file.size();  // the header itself never got out
    return out;
  }
  if (all_zero(file)) {
    out.torn_tail_bytes = file.size();  // allocated, never written
    return out;
  }
  if (!std::equal(header.begin(), header.end(), file.begin())) {
    out.corruption = "not a history journal, or of another version (bad file header)";
    return out;
  }
  std::size_t at = header.size();
  out.valid_bytes = at;
  while (at < file.size()) {
    const auto rest = file.subspan(at);
    std::uint32_t length = 0;
    std::uint32_t crc = 0;
    if (rest.size() >= journal_record_header_bytes) {
      std::memcpy(&length, rest.data(), 4);
      std::memcpy(&crc, rest.data() + 4, 4);
    }
    const bool cut_short = rest.size() < journal_record_header_bytes ||
                           rest.size() - journal_record_header_bytes < length;
    const bool framed = !cut_short && length > 0 && length <= journal_max_record_bytes;
    const bool intact = framed && crc_of(rest.data() + journal_record_header_bytes, length) == crc;
    if (!intact) {
      const std::size_t end = framed ? journal_record_header_bytes + length : rest.size();
      if (cut_short || all_zero(rest) || all_zero(rest.subspan(end))) {
        out.torn_tail_bytes = rest.size();
      } else {
        out.corruption = "a damaged record (bad length or checksum) with " + std::to_string(rest.size()) +
                         " bytes of journal after it";
      }
      return out;
    }
    auto record = decode_payload(rest.subspan(journal_record_header_bytes, length));
    if (!record) {
      out.corruption = "a record that passed its checksum but does not decode";
      return out;
    }
    if (const auto* model = std::get_if<JournalModel>(&*record)) out.model = *model;
    if (auto problem = apply_record(out.conversations, *record)) {
      out.corruption = *problem;
      return out;
    }
    if (const std::uint64_t uid = record_uid(*record); uid != 0) {
      if (std::holds_alternative<JournalRemove>(*record)) {
        out.spans.erase(uid);
      } else {
        out.spans[uid].push_back({at, journal_record_header_bytes + length});
      }
    }
    ++out.records;
    at += journal_record_header_bytes + length;
    out.valid_bytes = at;
  }
  return out;
}

}  // namespace pensieve::actors
