#include "tools/pensieve-trace/export_chrome.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <map>
#include <vector>

namespace pensieve::tools::trace {
namespace {

namespace json = boost::json;

// µs as the format wants them: whole numbers as integers, the rest as doubles.
json::value us_value(std::int64_t ns) {
  if (ns % 1000 == 0) return json::value(ns / 1000);
  return json::value(static_cast<double>(ns) / 1000.0);
}

json::value us_since(const Trace& trace, std::int64_t ns) { return us_value(ns - trace.begin_ns); }

json::object span_args(const rt::Span& s) {
  json::object args;
  if (s.id != 0) args["id"] = s.id;
  if (s.flow_id != 0) args["request"] = s.flow_id;
  if (!s.detail.empty()) args["detail"] = s.detail;
  if (s.kind == rt::SpanKind::message && s.enqueue_ns != 0 && s.enqueue_ns <= s.start_ns) {
    args["mailbox_wait_us"] = us_value(s.start_ns - s.enqueue_ns);
  }
  args["thread"] = s.thread;
  return args;
}

json::object metadata(const char* what, int tid, json::object args) {
  return json::object{{"name", what}, {"ph", "M"}, {"pid", chrome_pid}, {"tid", tid}, {"args", std::move(args)}};
}

// Where an exported span sits: its thread track and its start.
struct Placed {
  std::int64_t start_ns;
  int tid;
};

void append_lanes(const Trace& trace, json::array& events, std::map<std::uint64_t, std::vector<Placed>>& flows) {
  events.push_back(metadata("process_name", 0, json::object{{"name", "pensieve"}}));
  for (std::size_t l = 0; l < trace.lanes.size(); ++l) {
    const Lane& lane = trace.lanes[l];
    const int tid = static_cast<int>(l) + 1;
    const Track& track = trace.tracks[lane.track];
    const std::string label = track.kind == TrackKind::actor ? lane.label
                                                             : std::string(to_string(track.kind)) + ": " + lane.label;
    events.push_back(metadata("thread_name", tid, json::object{{"name", label}}));
    events.push_back(metadata("thread_sort_index", tid, json::object{{"sort_index", tid}}));
    for (std::size_t i : lane.spans) {
      const rt::Span& s = trace.spans[i];
      events.push_back(json::object{{"name", s.name},
                                    {"cat", rt::to_string(s.kind)},
                                    {"ph", "X"},
                                    {"ts", us_since(trace, s.start_ns)},
                                    {"dur", us_value(s.end_ns - s.start_ns)},
                                    {"pid", chrome_pid},
                                    {"tid", tid},
                                    {"args", span_args(s)}});
      if (s.flow_id != 0) flows[s.flow_id].push_back(Placed{s.start_ns, tid});
    }
  }
}

// Request-phase spans overlap freely, so they go on async tracks, one per
// request, rather than on a thread track.
void append_requests(const Trace& trace, json::array& events) {
  for (const rt::Span& s : trace.spans) {
    if (s.kind != rt::SpanKind::request) continue;
    const std::uint64_t request = s.flow_id != 0 ? s.flow_id : s.id;
    json::object common{{"name", s.name}, {"cat", "request"}, {"id", request}, {"pid", chrome_pid}, {"tid", 0}};
    if (s.start_ns == s.end_ns) {
      json::object point = common;
      point["ph"] = "n";
      point["ts"] = us_since(trace, s.start_ns);
      point["args"] = span_args(s);
      events.push_back(std::move(point));
      continue;
    }
    json::object begin = common;
    begin["ph"] = "b";
    begin["ts"] = us_since(trace, s.start_ns);
    begin["args"] = span_args(s);
    json::object end = std::move(common);
    end["ph"] = "e";
    end["ts"] = us_since(trace, s.end_ns);
    events.push_back(std::move(begin));
    events.push_back(std::move(end));
  }
}

// One arrow per consecutive pair of a request's spans, in start order; each
// arrow has its own id, and both ends bind to the span enclosing them.
void append_flows(const Trace& trace, std::map<std::uint64_t, std::vector<Placed>>& flows, json::array& events) {
  std::uint64_t arrow = 0;
  for (auto& [request, placed] : flows) {
    std::stable_sort(placed.begin(), placed.end(),
                     [](const Placed& a, const Placed& b) { return a.start_ns < b.start_ns; });
    for (std::size_t i = 0; i + 1 < placed.size(); ++i) {
      ++arrow;
      const json::object args{{"request", request}};
      events.push_back(json::object{{"name", "request"}, {"cat", "flow"}, {"ph", "s"}, {"id", arrow},
                                    {"bp", "e"}, {"ts", us_since(trace, placed[i].start_ns)},
                                    {"pid", chrome_pid}, {"tid", placed[i].tid}, {"args", args}});
      events.push_back(json::object{{"name", "request"}, {"cat", "flow"}, {"ph", "f"}, {"id", arrow},
                                    {"bp", "e"}, {"ts", us_since(trace, placed[i + 1].start_ns)},
                                    {"pid", chrome_pid}, {"tid", placed[i + 1].tid}, {"args", args}});
    }
  }
}

}  // namespace

json::value chrome_trace_json(const Trace& trace) {
  json::array events;
  std::map<std::uint64_t, std::vector<Placed>> flows;
  append_lanes(trace, events, flows);
  append_requests(trace, events);
  append_flows(trace, flows, events);
  json::object other{{"source", "pensieve-trace"},
                     {"trace_start_steady_ns", trace.begin_ns},
                     {"dropped_spans", trace.header.dropped_spans}};
  if (trace.header.clock_wall_ns != 0) {
    other["trace_start_wall_ns"] = trace.header.clock_wall_ns + (trace.begin_ns - trace.header.clock_steady_ns);
  }
  return json::object{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}, {"otherData", std::move(other)}};
}

}  // namespace pensieve::tools::trace
