#pragma once
// HistoryJournal: invariant 4 (the token history of an acknowledged turn
// survives a crash). An append-only file, <dir>/history.journal, of the
// records in actors/history_record.hpp (format and replay rule there): a
// conversation's creation, each turn's messages and tokens, and tombstones
// for deletes. A turn is acknowledged only after commit() returns, that is
// after its record and every record before it were written and fsynced.
// Concurrent commits share one write and one fsync (group commit): records
// queue up while a sync is in flight and go out together in the next one.
//
// Open replays the file: a torn tail (an interrupted, never acknowledged
// write) is dropped and the file rewritten without it. A corrupt record
// with data after it fails open() with the offset and the reason (the
// default, so no acknowledged history is silently lost), or with
// CorruptJournalPolicy::keep_prefix, keeps what came before it, moves the
// damaged file aside as history.journal.corrupt-<unix time> and goes on.
// When the file grows past the threshold (and to twice its size after the
// last compaction), it is compacted: the live conversations are written to
// a new file, fsynced and renamed over the old one.
//
// A turn record for a conversation deleted meanwhile is dropped when it is
// written (its tombstone came first), so replay can be strict.
//
// Memory: the journal holds a copy of the history of each conversation
// in memory (what the next turn's record is checked against and compaction
// writes), but not of those released (release(): a conversation that left
// memory, or one replayed at open and not loaded yet): of those it keeps
// only their names and where their records lie in the file, and load()
// reads their history back from there.
//
// Ownership and threads: owns the file and those copies; shares the IoRing, whose
// executor (one thread) does all the I/O. append() is thread-safe; sync()
// and commit() may be awaited from any executor and resume on it. open()
// does its I/O with plain syscalls: it runs once, before the engine starts.
#include "actors/history_record.hpp"
#include "runtime/error.hpp"
#include "runtime/io_ring.hpp"
#include "runtime/uring_file.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace pensieve::actors {

enum class CorruptJournalPolicy : std::uint8_t { fail, keep_prefix };

struct HistoryJournalOptions {
  std::filesystem::path dir;
  std::uint64_t compact_threshold_bytes = std::uint64_t{64} << 20;
  CorruptJournalPolicy on_corrupt = CorruptJournalPolicy::fail;
  // The model the histories are for. A journal recorded for another one
  // fails open(), naming both, unless `reset_on_model_change`: then its file
  // is moved aside as history.journal.model-<unix time> and the journal
  // starts empty. A journal without a model record (older ones) is taken as
  // this model's and gets the record. Absent: no check (tests of the format).
  std::optional<JournalModel> model;
  bool reset_on_model_change = false;
};

// What open() found.
struct JournalOpenReport {
  std::size_t records = 0;          // replayed
  std::size_t torn_tail_bytes = 0;  // dropped from the end
  std::optional<std::string> corruption;  // keep_prefix only: why replay stopped early
  std::filesystem::path moved_aside;      // keep_prefix only: where the damaged file went
  bool rewritten = false;           // the file was rewritten from the replayed conversations
  // reset_on_model_change only: the journal was another model's; what it held and where it went.
  std::optional<std::string> model_reset;
};

class HistoryJournal : public std::enable_shared_from_this<HistoryJournal> {
 public:
  static constexpr const char* file_name = "history.journal";

  static Result<std::shared_ptr<HistoryJournal>> open(std::shared_ptr<rt::IoRing> ring,
                                                      HistoryJournalOptions options);
  HistoryJournal(const HistoryJournal&) = delete;
  HistoryJournal& operator=(const HistoryJournal&) = delete;

  const JournalOpenReport& open_report() const { return report_; }
  // The conversations replayed by open(), by uid. Call before any append.
  const ConversationsByUid& recovered() const { return live_; }
  const std::filesystem::path& path() const { return path_; }
  // A live conversation as written to the file (every committed turn in
  // it); null: unknown, or its create record not written yet. A released
  // one's history is empty here (load() reads it). On the ring's executor.
  const JournaledConversation* find(std::uint64_t uid) const;
  // The same with its whole history, read back from the file if it was
  // released (it is held again from then on); an Error when the file
  // cannot be read or its records do not replay. On the ring's executor:
  // plain reads of the conversation's records (once per reload; the
  // ring's other I/O waits for them).
  Result<const JournaledConversation*> load(std::uint64_t uid);
  // Frees the copy of `uid`'s history (its records stay in the file): it
  // left memory. On the ring's executor, or before anything is appended.
  void release(std::uint64_t uid);
  // release() from any thread (posted to the ring's executor; it runs
  // after the records already written).
  void release_soon(std::uint64_t uid);
  // What the copies hold (tests, metrics), on the ring's executor.
  std::size_t held_tokens() const;
  std::size_t held_messages() const;
  std::size_t released() const { return released_.size(); }

  // Queues `record`; returns its sequence number. Nothing is durable yet.
  std::uint64_t append(JournalRecord record);
  // Completes when every record up to `seq` is durable, or with the error
  // that stopped the journal (a failed write or fsync stops it for good:
  // what reached the file after the last good fsync is unknown).
  boost::asio::awaitable<Result<void>> sync(std::uint64_t seq);
  // append() and sync(). `record` is copied before the first suspension;
  // pass a named object (GCC 12 mishandles temporaries in co_await).
  boost::asio::awaitable<Result<void>> commit(const JournalRecord& record);
  // Everything appended so far.
  boost::asio::awaitable<Result<void>> sync_all();
  // Makes `seq` durable in the background (a create or a delete that no one
  // waits for); a failure shows at the next sync.
  void flush_soon(std::uint64_t seq);

  // For tests and metrics, on the ring's executor (or when nothing runs).
  std::uint64_t file_bytes() const { return file_bytes_; }
  std::size_t syncs() const { return syncs_; }
  std::size_t compactions() const { return compactions_; }

 private:
  struct Pending {
    std::uint64_t seq = 0;
    JournalRecord record;
  };

  HistoryJournal(std::shared_ptr<rt::IoRing> ring, HistoryJournalOptions options, std::filesystem::path path,
                 rt::UringFile file, ConversationsByUid live, SpansByUid spans, std::optional<JournalModel> model,
                 JournalOpenReport report);
  // `uid`'s history replayed from its records in the file.
  Result<JournaledConversation> read_history(std::uint64_t uid) const;
  // On the ring's executor.
  boost::asio::awaitable<Result<void>> wait_durable(std::shared_ptr<HistoryJournal> keep_alive, std::uint64_t seq);
  boost::asio::awaitable<void> flush_all();
  boost::asio::awaitable<Result<void>> write_batch(const std::vector<Pending>& batch);  // by reference: GCC 12
  boost::asio::awaitable<Result<void>> compact();

  std::shared_ptr<rt::IoRing> ring_;
  HistoryJournalOptions options_;
  std::filesystem::path path_;
  JournalOpenReport report_;

  std::mutex mutex_;  // guards pending_ and next_seq_
  std::vector<Pending> pending_;
  std::uint64_t next_seq_ = 1;

  // On the ring's executor.
  rt::UringFile file_;
  ConversationsByUid live_;  // as written to the file (released ones without their history)
  SpansByUid spans_;         // where each live conversation's records lie in the file
  std::set<std::uint64_t> released_;
  std::optional<JournalModel> model_;  // the file's model record, rewritten by compaction
  std::uint64_t file_bytes_ = 0;
  std::uint64_t compacted_bytes_ = 0;
  std::uint64_t durable_seq_ = 0;
  bool flushing_ = false;
  std::optional<std::string> failure_;
  boost::asio::steady_timer changed_;  // cancelled when durable_seq_ or failure_ changes
  std::size_t syncs_ = 0;
  std::size_t compactions_ = 0;
};

}  // namespace pensieve::actors
