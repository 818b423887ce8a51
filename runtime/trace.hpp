#pragma once
// Trace spans: what ran, where, and when. A Tracer owns one fixed-size ring of
// span records per recording thread; a thread records into its own ring with
// plain stores and one release store (no locks, no allocation after the
// thread's first span). Off by default: a disabled tracer costs one
// predictable branch. drain() / flush_to() collect the rings (one drainer at a
// time, concurrently with recording) and write a Cap'n Proto trace file
// (schemas/trace.capnp) that read_trace() reads back.
//
// Threads: record() from any thread; enable()/disable() from any thread;
// drain()/flush_to() from any thread, serialised internally. The Tracer must
// outlive every thread's last record() through it.
#include "runtime/clock.hpp"
#include "runtime/error.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace pensieve::rt {

// Mirrors schema::SpanKind in schemas/trace.capnp (same order).
enum class SpanKind : std::uint8_t {
  message,    // an actor handled one mailbox message
  stream,     // a stream operation ran (kernel, copy, host function, wait)
  file_io,    // an io_uring read, write or fsync
  iteration,  // one scheduler iteration
  request,    // a request's lifecycle point
  custom,
};

std::string_view to_string(SpanKind kind) noexcept;

// One span as recorded. `actor` and `name` are not copied: they must point to
// strings that outlive the Tracer's next drain (string literals, or strings
// returned by Tracer::intern). `detail` is copied into the ring when recorded
// (its first max_detail_chars characters), so it may be a temporary.
struct SpanRecord {
  SpanKind kind = SpanKind::custom;
  std::string_view actor;  // actor or stream name
  std::string_view name;   // message type or operation
  std::uint64_t id = 0;    // request / conversation / operation id (0: none)
  std::int64_t start_ns = 0;  // steady_now_ns()
  std::int64_t end_ns = 0;
  // Links the spans of one request across actors and streams (0: none).
  std::uint64_t flow_id = 0;
  // Message spans: when the message was sent, in the same unit as start_ns
  // (0: unknown). start_ns - enqueue_ns is the time it waited in the mailbox.
  std::int64_t enqueue_ns = 0;
  std::string_view detail{};  // e.g. a batch's composition "prefill=3x512 decode=14"
};

// The longest `detail` a span keeps; longer ones are cut.
inline constexpr std::size_t max_detail_chars = 46;

// One span as collected or read back: owns its strings.
struct Span {
  SpanKind kind = SpanKind::custom;
  std::string actor;
  std::string name;
  std::uint64_t id = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t thread = 0;  // index of the recording thread within its Tracer
  std::uint64_t flow_id = 0;
  std::string detail{};
  std::int64_t enqueue_ns = 0;  // 0: unknown
  bool operator==(const Span&) const = default;
};

// What a trace file says about its recording besides the spans.
struct TraceHeader {
  // A steady-clock reading and the wall clock (Unix ns) read together:
  // wall time of a span time t is clock_wall_ns + (t - clock_steady_ns).
  std::int64_t clock_steady_ns = 0;
  std::int64_t clock_wall_ns = 0;
  std::int64_t start_steady_ns = 0;  // when recording was last enabled (0: never)
  std::uint64_t dropped_spans = 0;
  std::vector<std::string> thread_names{};  // by Span::thread ("" when unnamed)
  bool operator==(const TraceHeader&) const = default;
};

struct TraceFile {
  TraceHeader header;  // all zero for files written before headers existed
  std::vector<Span> spans;
};

namespace detail {
struct TraceRing;  // one thread's single-producer ring (trace.cpp)
}

class Tracer {
 public:
  static constexpr std::size_t default_spans_per_thread = std::size_t{1} << 15;

  // `spans_per_thread` is rounded up to a power of two. When a thread's ring
  // is full (nobody drained it), new spans are dropped and counted.
  explicit Tracer(std::size_t spans_per_thread = default_spans_per_thread);
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  bool enabled() const noexcept { return enabled_.load(std::memory_order_relaxed); }
  void enable() noexcept {
    enabled_since_ns_.store(steady_now_ns(), std::memory_order_relaxed);
    enabled_.store(true, std::memory_order_relaxed);
  }
  void disable() noexcept { enabled_.store(false, std::memory_order_relaxed); }

  // Records one span into the calling thread's ring; does nothing when
  // disabled. Lock-free after the calling thread's first span.
  void record(const SpanRecord& span) noexcept {
    if (enabled()) record_enabled(span, false);
  }

  // As record(), with start_ns and end_ns in cpu_ticks() rather than ns;
  // drain() converts them. What TraceSpan uses: it saves two clock reads.
  void record_ticks(const SpanRecord& span) noexcept {
    if (enabled()) record_enabled(span, true);
  }

  // Returns a view of a copy of `text` that lives as long as the Tracer, for
  // names built at run time (an actor's instance name). Takes a lock.
  std::string_view intern(std::string_view text);

  // Names the calling thread in the trace file's header (a loop thread's role:
  // "gpu worker"), registering its ring if it has none yet. Takes a lock.
  void name_this_thread(std::string_view name);

  // The header flush_to writes: the clocks read now, and what the tracer knows.
  TraceHeader header() const;

  // Moves every span recorded so far out of the rings, oldest first per thread.
  std::vector<Span> drain();
  // Drains and writes the spans to `path` (replacing it); returns their count.
  Result<std::size_t> flush_to(const std::string& path);

  // Spans lost because a ring was full, since construction.
  std::uint64_t dropped() const noexcept;
  // Threads that have recorded at least one span.
  std::size_t thread_count() const;

 private:
  void record_enabled(const SpanRecord& span, bool in_ticks) noexcept;
  detail::TraceRing* ring_for_this_thread();

  std::atomic<bool> enabled_{false};
  std::atomic<std::int64_t> enabled_since_ns_{0};
  const std::size_t capacity_;
  const std::uint64_t uid_;  // tells this Tracer apart in per-thread caches

  mutable std::mutex rings_mutex_;  // guards rings_ (registration and drain)
  std::vector<std::unique_ptr<detail::TraceRing>> rings_;
  std::mutex drain_mutex_;  // one drainer at a time; guards the anchor
  // The last (ticks, ns) pair read together: ticks recorded since convert by
  // interpolating between it and the next drain's pair.
  std::uint64_t anchor_ticks_;
  std::int64_t anchor_ns_;

  std::mutex intern_mutex_;
  std::unordered_set<std::string> interned_;
};

// Records one span covering its own lifetime (construction to destruction).
// Reads the clock (cpu_ticks) only when the tracer is present and enabled.
class TraceSpan {
 public:
  TraceSpan(Tracer* tracer, SpanKind kind, std::string_view actor, std::string_view name,
            std::uint64_t id = 0) noexcept
      : tracer_(tracer != nullptr && tracer->enabled() ? tracer : nullptr) {
    if (tracer_ != nullptr) {
      new (&record_) SpanRecord{kind, actor, name, id, static_cast<std::int64_t>(cpu_ticks()), 0, 0, 0};
    }
  }
  ~TraceSpan() {
    if (tracer_ != nullptr) {
      record_.end_ns = static_cast<std::int64_t>(cpu_ticks());
      tracer_->record_ticks(record_);
    }
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

  // Sets the id once it is known (a reply's request id).
  void set_id(std::uint64_t id) noexcept {
    if (tracer_ != nullptr) record_.id = id;
  }
  void set_flow_id(std::uint64_t flow_id) noexcept {
    if (tracer_ != nullptr) record_.flow_id = flow_id;
  }
  // `enqueue_ticks`: cpu_ticks() when the message was sent (0: unknown).
  void set_enqueue_ticks(std::uint64_t enqueue_ticks) noexcept {
    if (tracer_ != nullptr) record_.enqueue_ns = static_cast<std::int64_t>(enqueue_ticks);
  }
  // Copied when the span ends: `detail` must stay valid until then.
  void set_detail(std::string_view detail) noexcept {
    if (tracer_ != nullptr) record_.detail = detail;
  }
  // Whether the span will be recorded (worth building a detail string for).
  bool recording() const noexcept { return tracer_ != nullptr; }

 private:
  Tracer* tracer_;
  // Built only when recording: a span that records nothing writes nothing.
  union {
    SpanRecord record_;
  };
};

// Reads a trace file written by Tracer::flush_to: its spans, or with its header.
Result<std::vector<Span>> read_trace(const std::string& path);
Result<TraceFile> read_trace_file(const std::string& path);

}  // namespace pensieve::rt
