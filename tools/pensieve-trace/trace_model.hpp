#pragma once
// A trace file read back and arranged for the three views of pensieve-trace:
// its spans, grouped into tracks (one per actor, stream and file), each
// track's spans laid out in lanes of properly nested spans, and the interval
// arithmetic that busy times and overlaps need. Plain data, no I/O beyond
// load_trace; single-threaded.
#include "runtime/error.hpp"
#include "runtime/trace.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pensieve::tools::trace {

// [first, second) in steady-clock ns.
using Interval = std::pair<std::int64_t, std::int64_t>;

// Sorted, disjoint, non-empty intervals covering exactly the time `intervals`
// cover (touching intervals merge).
std::vector<Interval> merge_intervals(std::vector<Interval> intervals);
std::int64_t total_ns(const std::vector<Interval>& merged);
// Time covered by both of two merged lists.
std::int64_t overlap_ns(const std::vector<Interval>& a, const std::vector<Interval>& b);

enum class TrackKind { actor, stream, file };
std::string_view to_string(TrackKind kind);

// The spans recorded under one name: an actor's messages and iterations, a
// stream's operations, or a file's I/O. Request-phase spans (SpanKind::request)
// belong to requests, not tracks.
struct Track {
  TrackKind kind = TrackKind::actor;
  std::string name;
  std::vector<std::size_t> spans;  // into Trace::spans, by start, longer first
};

// One row of a picture: spans of one track that nest properly (a span lies
// inside or after each span before it), with each span's nesting depth.
struct Lane {
  std::size_t track = 0;
  std::string label;  // the track's name; "name #2" for its overflow lanes
  std::vector<std::size_t> spans;
  std::vector<unsigned> depths;  // parallel to spans
};

struct Trace {
  rt::TraceHeader header;
  std::vector<rt::Span> spans;
  std::vector<Track> tracks;  // actors (serving actors first), then streams, then files
  std::vector<Lane> lanes;    // every track's lanes, in track order
  std::int64_t begin_ns = 0;  // the first span's start (0 when there are none)
  std::int64_t end_ns = 0;    // the last span's end
  std::int64_t wall_ns() const { return end_ns - begin_ns; }
};

// Reads and arranges a trace file; an Error names the file and what is wrong.
Result<Trace> load_trace(const std::string& path);
// Arranges spans already read; an Error when a span ends before it starts.
Result<Trace> arrange_trace(rt::TraceFile file);

// Whether a stream moves KV blocks (its name contains "copy" or "swap").
bool is_swap_stream(std::string_view name);
// Whether a span on a track counts as its track being busy (a stream parked
// on an event is not).
bool counts_as_busy(const rt::Span& span);
// The merged busy intervals of one track.
std::vector<Interval> busy_intervals(const Trace& trace, const Track& track);

}  // namespace pensieve::tools::trace
