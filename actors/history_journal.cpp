#include "actors/history_journal.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <unistd.h>

namespace pensieve::actors {

namespace asio = boost::asio;

namespace {

std::string errno_text() { return std::strerror(errno); }

// Startup only: plain syscalls.
Result<std::vector<std::byte>> read_whole(const std::filesystem::path& path) {
  std::vector<std::byte> bytes;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return bytes;
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("open " + path.string() + " failed: " + errno_text());
  in.seekg(0, std::ios::end);
  bytes.resize(std::size_t(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!in) return fail("read " + path.string() + " failed");
  return bytes;
}

Result<void> fsync_path(const std::filesystem::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return fail("open " + path.string() + " failed: " + errno_text());
  const int rc = ::fsync(fd);
  const std::string why = rc != 0 ? errno_text() : std::string();
  ::close(fd);
  if (rc != 0) return fail("fsync " + path.string() + " failed: " + why);
  return {};
}

// Replaces `path` with `bytes` so that a crash leaves the old file or the
// new one, never a mix: a temp file, fsync, rename, fsync of the directory.
Result<void> replace_durably(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return fail("create " + tmp.string() + " failed: " + errno_text());
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = errno_text();
      ::close(fd);
      return fail("write " + tmp.string() + " failed: " + why);
    }
    done += std::size_t(n);
  }
  const int rc = ::fsync(fd);
  const std::string why = rc != 0 ? errno_text() : std::string();
  ::close(fd);
  if (rc != 0) return fail("fsync " + tmp.string() + " failed: " + why);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("rename " + tmp.string() + " failed: " + errno_text());
  return fsync_path(path.parent_path(), O_RDONLY | O_DIRECTORY);
}

// A whole journal file: the header, the model record, then each
// conversation's records (its history from `history`); `spans` gets where
// each conversation's lie.
template <class History>
Result<std::vector<std::byte>> encode_with_spans(const ConversationsByUid& live,
                                                 const std::optional<JournalModel>& model, SpansByUid& spans,
                                                 History history) {
  std::vector<std::byte> out = encode_file_header();
  if (model) encode_record(*model, out);
  spans.clear();
  for (const auto& [uid, c] : live) {
    const std::size_t start = out.size();
    Result<void> encoded = history(c, out);
    if (!encoded) return encoded.error();
    spans[uid].push_back({start, out.size() - start});
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<HistoryJournal>> HistoryJournal::open(std::shared_ptr<rt::IoRing> ring,
                                                             HistoryJournalOptions options) {
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) return fail("create --history-dir " + options.dir.string() + " failed: " + ec.message());
  const std::filesystem::path path = options.dir / file_name;
  auto bytes = read_whole(path);
  if (!bytes) return bytes.error();
  ReplayOutcome replay = replay_journal(*bytes);
  JournalOpenReport report;
  report.records = replay.records;
  report.torn_tail_bytes = replay.torn_tail_bytes;
  if (replay.corruption) {
    const std::string where = "history journal " + path.string() + " is corrupt at byte " +
                              std::to_string(replay.valid_bytes) + ": " + *replay.corruption;
    if (options.on_corrupt == CorruptJournalPolicy::fail) {
      return fail(where + " (move the file aside to start without its history)");
    }
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    report.moved_aside =
        path.string() + ".corrupt-" + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count());
    std::filesystem::rename(path, report.moved_aside, ec);
    if (ec) return fail(where + "; moving it aside failed: " + ec.message());
    report.corruption = *replay.corruption;
  }
  // Token ids mean nothing under another model: its histories are not restored.
  const bool model_differs = options.model && replay.model && !same_model(*replay.model, *options.model);
  if (model_differs) {
    const std::string both = "history journal " + path.string() + " holds the conversations of model " +
                             describe(*replay.model) + "; the loaded model is " + describe(*options.model);
    if (!options.reset_on_model_change) {
      return fail(both + " (--history-reset-on-model-change starts without that history)");
    }
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const std::filesystem::path aside =
        path.string() + ".model-" + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count());
    if (!replay.corruption) std::filesystem::rename(path, aside, ec);  // a damaged one is aside already
    if (ec) return fail(both + "; moving it aside failed: " + ec.message());
    report.model_reset = both + "; it was moved to " +
                         (replay.corruption ? report.moved_aside : aside).string() + " and the history starts empty";
    replay.conversations.clear();
  }
  const bool record_model = options.model && (!replay.model || model_differs);
  std::optional<JournalModel> model = options.model ? options.model : replay.model;
  // A new, torn, damaged or oversized file is rewritten from what replayed;
  // so is one that lacks the model's record.
  std::uint64_t size = bytes->size();
  if (replay.corruption || replay.torn_tail_bytes > 0 || bytes->empty() ||
      bytes->size() > options.compact_threshold_bytes || record_model) {
    auto fresh = encode_with_spans(replay.conversations, model, replay.spans,
                                   [](const JournaledConversation& c, std::vector<std::byte>& out) {
                                     encode_conversation(c, out);
                                     return Result<void>{};
                                   });
    if (!fresh) return fresh.error();
    if (auto r = replace_durably(path, *fresh); !r) return r.error();
    size = fresh->size();
    report.rewritten = true;
  }
  auto file = rt::UringFile::open(ring, path.string(), {.writable = true, .direct = rt::DirectIo::never});
  if (!file) return file.error();
  auto journal = std::shared_ptr<HistoryJournal>(new HistoryJournal(
      std::move(ring), std::move(options), path, std::move(*file), std::move(replay.conversations),
      std::move(replay.spans), std::move(model), report));
  journal->file_bytes_ = journal->compacted_bytes_ = size;
  return journal;
}

HistoryJournal::HistoryJournal(std::shared_ptr<rt::IoRing> ring, HistoryJournalOptions options,
                               std::filesystem::path path, rt::UringFile file, ConversationsByUid live,
                               SpansByUid spans, std::optional<JournalModel> model, JournalOpenReport report)
    : ring_(std::move(ring)),
      options_(std::move(options)),
      path_(std::move(path)),
      report_(std::move(report)),
      file_(std::move(file)),
      live_(std::move(live)),
      spans_(std::move(spans)),
      model_(std::move(model)),
      changed_(ring_->get_executor(), asio::steady_timer::time_point::max()) {}

std::uint64_t HistoryJournal::append(JournalRecord record) {
  std::lock_guard lock(mutex_);
  const std::uint64_t seq = next_seq_++;
  pending_.push_back(Pending{seq, std::move(record)});
  return seq;
}

asio::awaitable<Result<void>> HistoryJournal::sync(std::uint64_t seq) {
  // The waiting and the I/O run on the ring's executor; the caller resumes on its own.
  co_return co_await asio::co_spawn(ring_->get_executor(), wait_durable(shared_from_this(), seq),
                                    asio::use_awaitable);
}

asio::awaitable<Result<void>> HistoryJournal::commit(const JournalRecord& record) {
  const std::uint64_t seq = append(record);
  co_return co_await sync(seq);
}

asio::awaitable<Result<void>> HistoryJournal::sync_all() {
  std::uint64_t last = 0;
  {
    std::lock_guard lock(mutex_);
    last = next_seq_ - 1;
  }
  co_return co_await sync(last);
}

void HistoryJournal::flush_soon(std::uint64_t seq) {
  asio::co_spawn(ring_->get_executor(), wait_durable(shared_from_this(), seq), asio::detached);
}

asio::awaitable<Result<void>> HistoryJournal::wait_durable(std::shared_ptr<HistoryJournal> keep_alive,
                                                           std::uint64_t seq) {
  (void)keep_alive;  // holds the journal while this waits
  for (;;) {
    if (durable_seq_ >= seq) co_return Result<void>{};
    if (failure_) co_return fail(*failure_);
    if (!flushing_) {
      co_await flush_all();
      continue;
    }
    // Woken (cancelled) by the flusher after each batch.
    auto [ec] = co_await changed_.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;
  }
}

asio::awaitable<void> HistoryJournal::flush_all() {
  flushing_ = true;
  for (;;) {
    std::vector<Pending> batch;
    {
      std::lock_guard lock(mutex_);
      batch.swap(pending_);
    }
    if (batch.empty()) break;
    const std::uint64_t last = batch.back().seq;
    Result<void> written = co_await write_batch(batch);
    if (!written) {
      failure_ = written.error().message;
      break;
    }
    durable_seq_ = last;
    ++syncs_;
    changed_.cancel();
    if (file_bytes_ > options_.compact_threshold_bytes && file_bytes_ > 2 * compacted_bytes_) {
      Result<void> compacted = co_await compact();
      if (!compacted) {
        failure_ = compacted.error().message;
        break;
      }
    }
  }
  flushing_ = false;
  changed_.cancel();
}

const JournaledConversation* HistoryJournal::find(std::uint64_t uid) const {
  auto it = live_.find(uid);
  return it == live_.end() ? nullptr : &it->second;
}

Result<JournaledConversation> HistoryJournal::read_history(std::uint64_t uid) const {
  auto spans = spans_.find(uid);
  if (spans == spans_.end()) return fail("history journal: no records of conversation uid " + std::to_string(uid));
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail("open " + path_.string() + " failed: " + errno_text());
  std::vector<std::byte> bytes;
  for (const RecordSpan& span : spans->second) {
    const std::size_t at = bytes.size();
    bytes.resize(at + span.bytes);
    const ssize_t n = ::pread(fd, bytes.data() + at, span.bytes, off_t(span.offset));
    if (n != ssize_t(span.bytes)) {
      const std::string why = n < 0 ? errno_text() : "the file ends early";
      ::close(fd);
      return fail("read " + path_.string() + " failed: " + why);
    }
  }
  ::close(fd);
  ConversationsByUid one;
  if (auto problem = apply_records(one, bytes)) {
    return fail("history journal " + path_.string() + ": conversation uid " + std::to_string(uid) + ": " + *problem);
  }
  auto it = one.find(uid);
  if (it == one.end()) return fail("history journal: conversation uid " + std::to_string(uid) + " not in its records");
  return std::move(it->second);
}

Result<const JournaledConversation*> HistoryJournal::load(std::uint64_t uid) {
  auto it = live_.find(uid);
  if (it == live_.end()) return nullptr;
  if (released_.contains(uid)) {
    auto full = read_history(uid);
    if (!full) return full.error();
    it->second = std::move(*full);
    released_.erase(uid);
  }
  return &it->second;
}

void HistoryJournal::release(std::uint64_t uid) {
  auto it = live_.find(uid);
  if (it == live_.end() || !spans_.contains(uid)) return;  // its create record is not written yet
  // Swapped with empty ones: clear() would keep the capacity.
  std::vector<model::ChatMessage>().swap(it->second.messages);
  std::vector<std::int32_t>().swap(it->second.tokens);
  released_.insert(uid);
}

void HistoryJournal::release_soon(std::uint64_t uid) {
  asio::post(ring_->get_executor(), [self = shared_from_this(), uid] { self->release(uid); });
}

std::size_t HistoryJournal::held_tokens() const {
  std::size_t n = 0;
  for (const auto& [uid, c] : live_) n += c.tokens.size();
  return n;
}

std::size_t HistoryJournal::held_messages() const {
  std::size_t n = 0;
  for (const auto& [uid, c] : live_) n += c.messages.size();
  return n;
}

asio::awaitable<Result<void>> HistoryJournal::write_batch(const std::vector<Pending>& batch) {
  std::vector<std::byte> bytes;
  std::vector<std::pair<std::uint64_t, RecordSpan>> written;  // offsets in `bytes` until the write lands
  for (const Pending& p : batch) {
    const auto* turn = std::get_if<JournalTurn>(&p.record);
    if (turn != nullptr && !live_.contains(turn->uid)) continue;  // deleted while the turn ran
    // A turn of a released conversation is checked against its history: held again.
    if (turn != nullptr && released_.contains(turn->uid)) {
      if (auto held = load(turn->uid); !held) co_return held.error();
    }
    if (auto problem = apply_record(live_, p.record)) co_return fail("history journal: " + *problem);
    const std::size_t start = bytes.size();
    encode_record(p.record, bytes);
    if (const std::uint64_t uid = record_uid(p.record); uid != 0) {
      if (std::holds_alternative<JournalRemove>(p.record)) {
        spans_.erase(uid);
        released_.erase(uid);
      } else {
        written.push_back({uid, RecordSpan{start, bytes.size() - start}});
      }
    }
  }
  if (!bytes.empty()) {
    Result<void> w = co_await file_.write_at(file_bytes_, bytes);
    if (!w) co_return w.error();
    for (auto& [uid, span] : written) {
      if (!live_.contains(uid)) continue;  // removed by a later record of this batch
      span.offset += file_bytes_;
      spans_[uid].push_back(span);
    }
    file_bytes_ += bytes.size();
  }
  co_return co_await file_.fsync();
}

asio::awaitable<Result<void>> HistoryJournal::compact() {
  // Released conversations' histories are read back one at a time, encoded
  // and let go again.
  SpansByUid spans;
  auto encoded = encode_with_spans(live_, model_, spans,
                                   [this](const JournaledConversation& c, std::vector<std::byte>& out) -> Result<void> {
                                     if (!released_.contains(c.uid)) {
                                       encode_conversation(c, out);
                                       return {};
                                     }
                                     auto full = read_history(c.uid);
                                     if (!full) return full.error();
                                     encode_conversation(*full, out);
                                     return {};
                                   });
  if (!encoded) co_return encoded.error();
  const std::vector<std::byte> bytes = std::move(*encoded);
  const std::string tmp = path_.string() + ".tmp";
  auto fresh = rt::UringFile::open(ring_, tmp,
                                   {.writable = true, .create = true, .truncate = true, .direct = rt::DirectIo::never,
                                    .mode = 0600});
  if (!fresh) co_return fresh.error();
  Result<void> w = co_await fresh->write_at(0, bytes);
  if (!w) co_return w.error();
  Result<void> s = co_await fresh->fsync();
  if (!s) co_return s.error();
  // rename(2) and the directory's fsync are metadata-only and rare (one per
  // compaction); io_uring's rename would need a new IoRing opcode.
  if (::rename(tmp.c_str(), path_.c_str()) != 0) co_return fail("rename " + tmp + " failed: " + errno_text());
  spans_ = std::move(spans);  // before any suspension: a load() from now on reads the new file
  auto dir = rt::UringFile::open(ring_, path_.parent_path().string(), {.direct = rt::DirectIo::never});
  if (!dir) co_return dir.error();
  Result<void> d = co_await dir->fsync();
  if (!d) co_return d.error();
  file_ = std::move(*fresh);
  file_bytes_ = compacted_bytes_ = bytes.size();
  ++compactions_;
  co_return Result<void>{};
}

}  // namespace pensieve::actors
