#include "tools/pensieve-trace/summary.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <cstdio>
#include <map>

namespace pensieve::tools::trace {
namespace {

ActorSummary summarize_actor(const Trace& trace, const Track& track) {
  ActorSummary a;
  a.name = track.name;
  a.spans = track.spans.size();
  a.wall_ns = trace.wall_ns();
  a.busy_ns = total_ns(busy_intervals(trace, track));
  a.idle_ns = a.wall_ns - a.busy_ns;
  for (std::size_t i : track.spans) {
    const rt::Span& s = trace.spans[i];
    if (s.kind != rt::SpanKind::message || s.enqueue_ns == 0 || s.enqueue_ns > s.start_ns) continue;
    const std::int64_t wait = s.start_ns - s.enqueue_ns;
    ++a.waited_messages;
    a.wait_total_ns += wait;
    a.wait_max_ns = std::max(a.wait_max_ns, wait);
  }
  return a;
}

int phase_index(std::string_view name) {
  for (std::size_t p = 0; p < phase_priority.size(); ++p) {
    if (phase_priority[p] == name) return static_cast<int>(p);
  }
  return -1;
}

// Splits one request's time over its phases: every instant between its first
// and last span goes to the highest-priority phase covering it, or to other.
RequestSummary summarize_request(const Trace& trace, std::uint64_t flow_id,
                                 const std::vector<std::size_t>& spans) {
  RequestSummary r;
  r.flow_id = flow_id;
  std::int64_t first = trace.spans[spans.front()].start_ns;
  std::int64_t last = trace.spans[spans.front()].end_ns;
  std::vector<std::int64_t> cuts;
  std::vector<std::pair<int, Interval>> phases;
  for (std::size_t i : spans) {
    const rt::Span& s = trace.spans[i];
    first = std::min(first, s.start_ns);
    last = std::max(last, s.end_ns);
    cuts.push_back(s.start_ns);
    cuts.push_back(s.end_ns);
    if (const int p = phase_index(s.name); p >= 0) phases.emplace_back(p, Interval{s.start_ns, s.end_ns});
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
    int best = -1;
    for (const auto& [p, interval] : phases) {
      if (interval.first <= cuts[c] && cuts[c + 1] <= interval.second && (best < 0 || p < best)) best = p;
    }
    const std::int64_t piece = cuts[c + 1] - cuts[c];
    if (best < 0) {
      r.other_ns += piece;
    } else {
      r.phase_ns[static_cast<std::size_t>(best)] += piece;
    }
  }
  r.start_ns = first - trace.begin_ns;
  r.total_ns = last - first;
  return r;
}

std::vector<RequestSummary> summarize_requests(const Trace& trace) {
  std::map<std::uint64_t, std::vector<std::size_t>> by_flow;
  for (std::size_t i = 0; i < trace.spans.size(); ++i) {
    if (trace.spans[i].flow_id != 0) by_flow[trace.spans[i].flow_id].push_back(i);
  }
  std::vector<RequestSummary> requests;
  for (const auto& [flow, spans] : by_flow) requests.push_back(summarize_request(trace, flow, spans));
  std::stable_sort(requests.begin(), requests.end(),
                   [](const RequestSummary& a, const RequestSummary& b) { return a.total_ns > b.total_ns; });
  return requests;
}

}  // namespace

Summary summarize(const Trace& trace, std::size_t slowest_requests) {
  Summary s;
  s.span_count = trace.spans.size();
  s.dropped_spans = trace.header.dropped_spans;
  s.wall_ns = trace.wall_ns();
  std::vector<Interval> swap;
  std::vector<Interval> compute;
  for (const Track& track : trace.tracks) {
    if (track.kind == TrackKind::actor) {
      s.actors.push_back(summarize_actor(trace, track));
      continue;
    }
    std::vector<Interval> busy = busy_intervals(trace, track);
    StreamSummary st;
    st.name = track.name;
    st.kind = track.kind;
    st.swap = track.kind == TrackKind::stream && is_swap_stream(track.name);
    st.spans = track.spans.size();
    st.busy_ns = total_ns(busy);
    st.utilisation = s.wall_ns > 0 ? static_cast<double>(st.busy_ns) / static_cast<double>(s.wall_ns) : 0.0;
    if (track.kind == TrackKind::stream) {
      auto& into = st.swap ? swap : compute;
      into.insert(into.end(), busy.begin(), busy.end());
    }
    s.streams.push_back(std::move(st));
  }
  const std::vector<Interval> swap_merged = merge_intervals(std::move(swap));
  s.swap_ns = total_ns(swap_merged);
  s.swap_hidden_ns = overlap_ns(swap_merged, merge_intervals(std::move(compute)));
  if (s.swap_ns > 0) {
    s.swap_hidden_fraction = static_cast<double>(s.swap_hidden_ns) / static_cast<double>(s.swap_ns);
  }
  std::vector<RequestSummary> requests = summarize_requests(trace);
  s.request_count = requests.size();
  if (requests.size() > slowest_requests) requests.resize(slowest_requests);
  s.slowest_requests = std::move(requests);
  return s;
}

namespace {

std::string ms(std::int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1e6);
  return buf;
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", fraction * 100.0);
  return buf;
}

std::string row(const char* format, auto... values) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, values...);
  return buf;
}

void append_actors(std::string& out, const Summary& s) {
  out += "\nactors                      spans    busy ms    idle ms    wall ms   busy  mailbox wait ms (mean / max)\n";
  for (const ActorSummary& a : s.actors) {
    const double busy = a.wall_ns > 0 ? static_cast<double>(a.busy_ns) / static_cast<double>(a.wall_ns) : 0.0;
    std::string wait = "-";
    if (a.waited_messages > 0) {
      wait = ms(a.wait_total_ns / static_cast<std::int64_t>(a.waited_messages)) + " / " + ms(a.wait_max_ns);
    }
    out += row("  %-24s %7zu %10s %10s %10s %6s  %s\n", a.name.c_str(), a.spans, ms(a.busy_ns).c_str(),
               ms(a.idle_ns).c_str(), ms(a.wall_ns).c_str(), percent(busy).c_str(), wait.c_str());
  }
}

void append_streams(std::string& out, const Summary& s) {
  out += "\nstreams and files           spans    busy ms  utilisation\n";
  for (const StreamSummary& st : s.streams) {
    const std::string label = st.name + (st.kind == TrackKind::file ? " (file)" : st.swap ? " (swap)" : "");
    out += row("  %-24s %7zu %10s  %s\n", label.c_str(), st.spans, ms(st.busy_ns).c_str(),
               percent(st.utilisation).c_str());
  }
  if (s.swap_hidden_fraction) {
    out += "swap hidden under compute: " + percent(*s.swap_hidden_fraction) + " (" + ms(s.swap_hidden_ns) +
           " of " + ms(s.swap_ns) + " ms)\n";
  } else {
    out += "swap hidden under compute: n/a (no swap stream time)\n";
  }
}

void append_requests(std::string& out, const Summary& s) {
  out += row("\nslowest requests (%zu of %zu), ms\n", s.slowest_requests.size(), s.request_count);
  out += "  request          start      total";
  for (std::string_view p : phase_priority) out += row(" %10s", std::string(p).c_str());
  out += "      other\n";
  for (const RequestSummary& r : s.slowest_requests) {
    out += row("  %-12llu %9s %10s", static_cast<unsigned long long>(r.flow_id), ms(r.start_ns).c_str(),
               ms(r.total_ns).c_str());
    for (std::int64_t p : r.phase_ns) out += row(" %10s", ms(p).c_str());
    out += row(" %10s\n", ms(r.other_ns).c_str());
  }
}

}  // namespace

std::string summary_text(const Summary& s) {
  std::string out = row("trace: %zu spans over %s ms", s.span_count, ms(s.wall_ns).c_str());
  if (s.dropped_spans > 0) out += row(" (%llu spans dropped: rings were full)", static_cast<unsigned long long>(s.dropped_spans));
  out += "\n";
  append_actors(out, s);
  append_streams(out, s);
  append_requests(out, s);
  return out;
}

boost::json::value summary_json(const Summary& s) {
  namespace json = boost::json;
  json::array actors;
  for (const ActorSummary& a : s.actors) {
    json::object o{{"name", a.name},       {"spans", a.spans},       {"busy_ns", a.busy_ns},
                   {"idle_ns", a.idle_ns}, {"wall_ns", a.wall_ns},   {"waited_messages", a.waited_messages},
                   {"mailbox_wait_total_ns", a.wait_total_ns}, {"mailbox_wait_max_ns", a.wait_max_ns}};
    actors.push_back(std::move(o));
  }
  json::array streams;
  for (const StreamSummary& st : s.streams) {
    streams.push_back(json::object{{"name", st.name},       {"kind", to_string(st.kind)},
                                   {"swap", st.swap},       {"spans", st.spans},
                                   {"busy_ns", st.busy_ns}, {"utilisation", st.utilisation}});
  }
  json::array requests;
  for (const RequestSummary& r : s.slowest_requests) {
    json::object phases;
    for (std::size_t p = 0; p < phase_priority.size(); ++p) phases[phase_priority[p]] = r.phase_ns[p];
    phases["other"] = r.other_ns;
    requests.push_back(json::object{{"flow_id", r.flow_id}, {"start_ns", r.start_ns},
                                    {"total_ns", r.total_ns}, {"phases_ns", std::move(phases)}});
  }
  json::object out{{"span_count", s.span_count},     {"dropped_spans", s.dropped_spans},
                   {"wall_ns", s.wall_ns},           {"actors", std::move(actors)},
                   {"streams", std::move(streams)},  {"swap_ns", s.swap_ns},
                   {"swap_hidden_ns", s.swap_hidden_ns}, {"request_count", s.request_count},
                   {"slowest_requests", std::move(requests)}};
  out["swap_hidden_fraction"] = s.swap_hidden_fraction ? json::value(*s.swap_hidden_fraction) : json::value(nullptr);
  return out;
}

}  // namespace pensieve::tools::trace
