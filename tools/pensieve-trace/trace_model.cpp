#include "tools/pensieve-trace/trace_model.hpp"

#include "runtime/trace_names.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

namespace pensieve::tools::trace {
namespace names = rt::trace_names;

std::vector<Interval> merge_intervals(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end());
  std::vector<Interval> merged;
  for (const Interval& i : intervals) {
    if (i.second <= i.first) continue;
    if (!merged.empty() && i.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, i.second);
    } else {
      merged.push_back(i);
    }
  }
  return merged;
}

std::int64_t total_ns(const std::vector<Interval>& merged) {
  std::int64_t total = 0;
  for (const Interval& i : merged) total += i.second - i.first;
  return total;
}

std::int64_t overlap_ns(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::int64_t both = 0;
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < a.size() && j < b.size()) {
    const std::int64_t from = std::max(a[i].first, b[j].first);
    const std::int64_t to = std::min(a[i].second, b[j].second);
    if (from < to) both += to - from;
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return both;
}

std::string_view to_string(TrackKind kind) {
  switch (kind) {
    case TrackKind::actor: return "actor";
    case TrackKind::stream: return "stream";
    case TrackKind::file: return "file";
  }
  return "unknown";
}

bool is_swap_stream(std::string_view name) {
  for (std::string_view marker : names::swap_stream_markers) {
    if (name.find(marker) != std::string_view::npos) return true;
  }
  return false;
}

bool counts_as_busy(const rt::Span& span) {
  return !(span.kind == rt::SpanKind::stream && span.name == names::stream_wait);
}

std::vector<Interval> busy_intervals(const Trace& trace, const Track& track) {
  std::vector<Interval> busy;
  for (std::size_t i : track.spans) {
    const rt::Span& s = trace.spans[i];
    if (counts_as_busy(s)) busy.emplace_back(s.start_ns, s.end_ns);
  }
  return merge_intervals(std::move(busy));
}

namespace {

// The serving actors come first, in the order a request meets them.
int actor_rank(std::string_view name) {
  constexpr std::array<std::string_view, 5> order = {names::http, names::conversation,
                                                     names::scheduler, names::swap_engine,
                                                     names::gpu_worker};
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i] == name) return static_cast<int>(i);
  }
  return static_cast<int>(order.size());
}

TrackKind track_kind_of(rt::SpanKind kind) {
  if (kind == rt::SpanKind::stream) return TrackKind::stream;
  if (kind == rt::SpanKind::file_io) return TrackKind::file;
  return TrackKind::actor;
}

std::vector<Track> group_tracks(const std::vector<rt::Span>& spans) {
  using Key = std::tuple<TrackKind, int, std::string>;
  std::map<Key, Track> by_key;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const rt::Span& s = spans[i];
    if (s.kind == rt::SpanKind::request) continue;
    const TrackKind kind = track_kind_of(s.kind);
    const int rank = kind == TrackKind::actor ? actor_rank(s.actor) : 0;
    Track& track = by_key[Key{kind, rank, s.actor}];
    track.kind = kind;
    track.name = s.actor;
    track.spans.push_back(i);
  }
  std::vector<Track> tracks;
  for (auto& [key, track] : by_key) {
    std::stable_sort(track.spans.begin(), track.spans.end(), [&spans](std::size_t a, std::size_t b) {
      if (spans[a].start_ns != spans[b].start_ns) return spans[a].start_ns < spans[b].start_ns;
      return spans[a].end_ns > spans[b].end_ns;  // an enclosing span before what it encloses
    });
    tracks.push_back(std::move(track));
  }
  return tracks;
}

// A lane under construction: the ends of the spans still open at the last start.
struct OpenLane {
  Lane lane;
  std::vector<std::int64_t> open_ends;
};

// Puts each span in the first lane where it nests: after or inside the spans
// open there. Properly nested tracks (the usual case) get exactly one lane.
void lay_out_track(const Trace& trace, std::size_t track_index, std::vector<Lane>& out) {
  const Track& track = trace.tracks[track_index];
  std::vector<OpenLane> lanes;
  for (std::size_t i : track.spans) {
    const rt::Span& s = trace.spans[i];
    bool placed = false;
    for (OpenLane& l : lanes) {
      while (!l.open_ends.empty() && l.open_ends.back() <= s.start_ns) l.open_ends.pop_back();
      if (!l.open_ends.empty() && s.end_ns > l.open_ends.back()) continue;
      l.lane.spans.push_back(i);
      l.lane.depths.push_back(static_cast<unsigned>(l.open_ends.size()));
      l.open_ends.push_back(s.end_ns);
      placed = true;
      break;
    }
    if (!placed) {
      OpenLane l;
      l.lane.track = track_index;
      l.lane.label = lanes.empty() ? track.name : track.name + " #" + std::to_string(lanes.size() + 1);
      l.lane.spans.push_back(i);
      l.lane.depths.push_back(0);
      l.open_ends.push_back(s.end_ns);
      lanes.push_back(std::move(l));
    }
  }
  for (OpenLane& l : lanes) out.push_back(std::move(l.lane));
}

}  // namespace

Result<Trace> arrange_trace(rt::TraceFile file) {
  Trace trace;
  trace.header = std::move(file.header);
  trace.spans = std::move(file.spans);
  for (std::size_t i = 0; i < trace.spans.size(); ++i) {
    const rt::Span& s = trace.spans[i];
    if (s.end_ns < s.start_ns) {
      return fail("span " + std::to_string(i) + " (" + s.actor + " / " + s.name +
                  ") ends before it starts");
    }
    trace.begin_ns = i == 0 ? s.start_ns : std::min(trace.begin_ns, s.start_ns);
    trace.end_ns = i == 0 ? s.end_ns : std::max(trace.end_ns, s.end_ns);
  }
  trace.tracks = group_tracks(trace.spans);
  for (std::size_t t = 0; t < trace.tracks.size(); ++t) lay_out_track(trace, t, trace.lanes);
  return trace;
}

Result<Trace> load_trace(const std::string& path) {
  auto file = rt::read_trace_file(path);
  if (!file) return file.error();
  auto trace = arrange_trace(std::move(*file));
  if (!trace) return fail("trace: " + path + ": " + trace.error().message);
  return trace;
}

}  // namespace pensieve::tools::trace
