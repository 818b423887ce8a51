// Per-thread single-producer rings and their collection. The recording thread
// owns `head_`, the drainer owns `tail_`; each side reads the other's index
// with acquire, so a slot is never written while it is being copied out.
#include "runtime/trace.hpp"

#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <tuple>
#include <utility>

namespace pensieve::rt {
namespace detail {

// Maps cpu_ticks() to steady-clock ns by interpolating between two anchors
// read together; exact at both, and ticks drift from the steady clock only
// by what it slews between two drains.
struct TickConverter {
  std::uint64_t ticks0;
  std::int64_t ns0;
  std::uint64_t ticks1;
  std::int64_t ns1;

  std::int64_t operator()(std::int64_t ticks) const {
    const auto span_ticks = static_cast<std::int64_t>(ticks1 - ticks0);
    if (span_ticks <= 0) return ns0;
    // long double keeps 64 mantissa bits: exact for any realistic offset.
    const auto offset = static_cast<long double>(ticks - static_cast<std::int64_t>(ticks0));
    return ns0 + static_cast<std::int64_t>(std::llround(offset * static_cast<long double>(ns1 - ns0) /
                                                        static_cast<long double>(span_ticks)));
  }
};

// A SpanRecord as stored: its detail copied in, packed into two cache lines.
struct alignas(64) TraceSlot {
  SpanKind kind;
  bool in_ticks;  // start_ns / end_ns / enqueue_ns hold cpu_ticks()
  std::uint8_t detail_chars;
  std::string_view actor;
  std::string_view name;
  std::uint64_t id;
  std::int64_t start_ns;
  std::int64_t end_ns;
  std::uint64_t flow_id;
  std::int64_t enqueue_ns;
  char detail[max_detail_chars];
};
static_assert(sizeof(TraceSlot) == 128, "a slot is two cache lines");

struct TraceRing {
  TraceRing(std::size_t capacity, std::uint32_t thread_index, std::thread::id owner)
      : slots(new TraceSlot[capacity]), mask(capacity - 1), thread(thread_index), owner_id(owner) {}

  void push(const SpanRecord& span, bool in_ticks) noexcept {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_.load(std::memory_order_acquire) > mask) {
      dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return;
    }
    TraceSlot& slot = slots[head & mask];
    slot.kind = span.kind;
    slot.in_ticks = in_ticks;
    slot.actor = span.actor;
    slot.name = span.name;
    slot.id = span.id;
    slot.start_ns = span.start_ns;
    slot.end_ns = span.end_ns;
    slot.flow_id = span.flow_id;
    slot.enqueue_ns = span.enqueue_ns;
    // Copied now (the caller's string may be gone by the drain); most spans
    // have none, so this costs them one branch.
    const std::size_t chars = span.detail.size() < max_detail_chars ? span.detail.size()
                                                                    : max_detail_chars;
    if (chars != 0) std::memcpy(slot.detail, span.detail.data(), chars);
    slot.detail_chars = static_cast<std::uint8_t>(chars);
    head_.store(head + 1, std::memory_order_release);
  }

  void drain_into(std::vector<Span>& out, const TickConverter& to_ns) {
    const std::uint64_t head = head_.load(std::memory_order_acquire);
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    for (std::uint64_t i = tail; i != head; ++i) {
      const TraceSlot& r = slots[i & mask];
      const bool ticks = r.in_ticks;
      const std::int64_t enqueue_ns = r.enqueue_ns == 0 ? 0 : ticks ? to_ns(r.enqueue_ns) : r.enqueue_ns;
      out.push_back(Span{r.kind, std::string(r.actor), std::string(r.name), r.id,
                         ticks ? to_ns(r.start_ns) : r.start_ns, ticks ? to_ns(r.end_ns) : r.end_ns,
                         thread, r.flow_id, std::string(r.detail, r.detail_chars), enqueue_ns});
    }
    tail_.store(head, std::memory_order_release);
  }

  std::unique_ptr<TraceSlot[]> slots;
  const std::uint64_t mask;
  const std::uint32_t thread;
  const std::thread::id owner_id;
  std::string name;  // guarded by Tracer::rings_mutex_
  alignas(64) std::atomic<std::uint64_t> head_{0};
  std::atomic<std::uint64_t> dropped_{0};
  alignas(64) std::atomic<std::uint64_t> tail_{0};
};

}  // namespace detail

namespace {

std::size_t round_up_pow2(std::size_t n) {
  std::size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// A (ticks, ns) pair read as close together as the clocks allow: the
// tightest of a few tries, so a preemption between the reads cannot skew it.
std::pair<std::uint64_t, std::int64_t> read_anchor() {
  std::pair<std::uint64_t, std::int64_t> best{};
  std::uint64_t best_window = ~std::uint64_t{0};
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::uint64_t before = cpu_ticks();
    const std::int64_t ns = steady_now_ns();
    const std::uint64_t window = cpu_ticks() - before;
    if (window < best_window) {
      best_window = window;
      best = {before + window / 2, ns};
    }
  }
  return best;
}

std::uint64_t next_tracer_uid() {
  static std::atomic<std::uint64_t> counter{0};  // uids are never reused
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

// A thread's recently used rings, keyed by Tracer uid, so a record() finds
// its ring without a lock. Entries of destroyed Tracers never match again.
struct RingCacheEntry {
  std::uint64_t uid = 0;
  detail::TraceRing* ring = nullptr;
};
constexpr std::size_t ring_cache_size = 4;
thread_local std::array<RingCacheEntry, ring_cache_size> ring_cache{};
thread_local std::size_t ring_cache_next = 0;

}  // namespace

std::string_view to_string(SpanKind kind) noexcept {
  switch (kind) {
    case SpanKind::message: return "message";
    case SpanKind::stream: return "stream";
    case SpanKind::file_io: return "file_io";
    case SpanKind::iteration: return "iteration";
    case SpanKind::request: return "request";
    case SpanKind::custom: return "custom";
  }
  return "unknown";
}

Tracer::Tracer(std::size_t spans_per_thread)
    : capacity_(round_up_pow2(spans_per_thread < 2 ? 2 : spans_per_thread)),
      uid_(next_tracer_uid()) {
  std::tie(anchor_ticks_, anchor_ns_) = read_anchor();
}

Tracer::~Tracer() = default;

void Tracer::record_enabled(const SpanRecord& span, bool in_ticks) noexcept {
  for (const RingCacheEntry& e : ring_cache) {
    if (e.uid == uid_) {
      e.ring->push(span, in_ticks);
      return;
    }
  }
  detail::TraceRing* ring = ring_for_this_thread();
  if (ring != nullptr) ring->push(span, in_ticks);
}

detail::TraceRing* Tracer::ring_for_this_thread() {
  const std::thread::id self = std::this_thread::get_id();
  detail::TraceRing* ring = nullptr;
  try {
    std::lock_guard lock(rings_mutex_);
    for (const auto& r : rings_) {
      if (r->owner_id == self) ring = r.get();
    }
    if (ring == nullptr) {
      const auto index = static_cast<std::uint32_t>(rings_.size());
      rings_.push_back(std::make_unique<detail::TraceRing>(capacity_, index, self));
      ring = rings_.back().get();
    }
  } catch (const std::bad_alloc&) {
    return nullptr;  // out of memory: the span is lost, the caller carries on
  }
  ring_cache[ring_cache_next] = RingCacheEntry{uid_, ring};
  ring_cache_next = (ring_cache_next + 1) % ring_cache_size;
  return ring;
}

std::string_view Tracer::intern(std::string_view text) {
  std::lock_guard lock(intern_mutex_);
  return *interned_.emplace(text).first;
}

void Tracer::name_this_thread(std::string_view name) {
  detail::TraceRing* ring = ring_for_this_thread();
  if (ring == nullptr) return;
  std::lock_guard lock(rings_mutex_);
  ring->name = name;
}

TraceHeader Tracer::header() const {
  TraceHeader h;
  h.clock_steady_ns = steady_now_ns();
  h.clock_wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  h.start_steady_ns = enabled_since_ns_.load(std::memory_order_relaxed);
  std::lock_guard lock(rings_mutex_);
  for (const auto& r : rings_) {
    h.dropped_spans += r->dropped_.load(std::memory_order_relaxed);
    h.thread_names.push_back(r->name);
  }
  return h;
}

std::vector<Span> Tracer::drain() {
  std::lock_guard drain_lock(drain_mutex_);
  std::vector<detail::TraceRing*> rings;
  {
    std::lock_guard lock(rings_mutex_);
    for (const auto& r : rings_) rings.push_back(r.get());
  }
  const auto [ticks, ns] = read_anchor();
  const detail::TickConverter to_ns{anchor_ticks_, anchor_ns_, ticks, ns};
  std::vector<Span> out;
  for (detail::TraceRing* r : rings) r->drain_into(out, to_ns);
  anchor_ticks_ = ticks;
  anchor_ns_ = ns;
  return out;
}

std::uint64_t Tracer::dropped() const noexcept {
  std::lock_guard lock(rings_mutex_);
  std::uint64_t total = 0;
  for (const auto& r : rings_) total += r->dropped_.load(std::memory_order_relaxed);
  return total;
}

std::size_t Tracer::thread_count() const {
  std::lock_guard lock(rings_mutex_);
  return rings_.size();
}

}  // namespace pensieve::rt
