#pragma once
// pensieve-trace summary: where the time of a traced run went. Per actor,
// busy, idle and wall time (busy + idle = wall, the trace's whole window,
// exactly; overlapping spans on one actor count once) and mailbox wait; per
// stream and file, busy time and utilisation; the share of swap-stream time
// hidden under compute streams; and the slowest requests split into phases
// (runtime/trace_names.hpp). Pure computation plus two renderings.
#include "runtime/trace_names.hpp"
#include "tools/pensieve-trace/trace_model.hpp"

#include <boost/json/value.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pensieve::tools::trace {

struct ActorSummary {
  std::string name;
  std::size_t spans = 0;
  std::int64_t busy_ns = 0;
  std::int64_t idle_ns = 0;
  std::int64_t wall_ns = 0;
  // Message spans that say when their message was sent, and their waits.
  std::size_t waited_messages = 0;
  std::int64_t wait_total_ns = 0;
  std::int64_t wait_max_ns = 0;
};

struct StreamSummary {
  std::string name;
  TrackKind kind = TrackKind::stream;  // stream or file
  bool swap = false;                   // a copy / swap stream
  std::size_t spans = 0;
  std::int64_t busy_ns = 0;
  double utilisation = 0;  // busy / the trace's wall time
};

// The phase order here is the attribution priority: an instant that lies in
// two phases of one request counts for the earlier phase in this list.
inline constexpr std::array<std::string_view, 5> phase_priority = {
    rt::trace_names::phase_prefill, rt::trace_names::phase_decode, rt::trace_names::phase_swap_in,
    rt::trace_names::phase_queue, rt::trace_names::phase_network};

struct RequestSummary {
  std::uint64_t flow_id = 0;
  std::int64_t start_ns = 0;  // relative to the trace's start
  std::int64_t total_ns = 0;  // first to last span of the request
  std::array<std::int64_t, phase_priority.size()> phase_ns{};
  std::int64_t other_ns = 0;  // in no phase; phases + other = total exactly
};

struct Summary {
  std::size_t span_count = 0;
  std::uint64_t dropped_spans = 0;
  std::int64_t wall_ns = 0;
  std::vector<ActorSummary> actors;
  std::vector<StreamSummary> streams;  // streams, then files
  std::int64_t swap_ns = 0;            // union of the swap streams' busy time
  std::int64_t swap_hidden_ns = 0;     // of it, overlapped by some compute stream
  std::optional<double> swap_hidden_fraction;  // none without swap time
  std::size_t request_count = 0;
  std::vector<RequestSummary> slowest_requests;  // longest first
};

Summary summarize(const Trace& trace, std::size_t slowest_requests);
std::string summary_text(const Summary& summary);
boost::json::value summary_json(const Summary& summary);

}  // namespace pensieve::tools::trace
