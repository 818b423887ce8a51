#pragma once
// The names that trace spans share between the actors that record them and
// pensieve-trace, which reads meaning into them: the track names of the
// serving actors and streams, and the request phases that the slow-request
// breakdown adds up. Record a phase as a span (any kind, usually
// SpanKind::request) whose name is one of `phases` and whose flow_id is the
// request id; the tool sums each phase's time per request.
//
// All names are string literals, so they satisfy SpanRecord's lifetime rule.
#include <array>
#include <string_view>

namespace pensieve::rt::trace_names {

// Actor tracks (SpanRecord::actor of message / iteration spans).
inline constexpr std::string_view conversation = "conversation";
inline constexpr std::string_view scheduler = "scheduler";
inline constexpr std::string_view swap_engine = "swap engine";
inline constexpr std::string_view gpu_worker = "gpu worker";
inline constexpr std::string_view http = "http";

// Stream tracks (SpanRecord::actor of SpanKind::stream spans). A stream whose
// name contains "copy" or "swap" moves KV blocks; every other stream computes.
// The summary's "swap hidden under compute" is the part of the copy streams'
// busy time that overlaps some compute stream's busy time.
inline constexpr std::string_view compute_stream = "compute";
inline constexpr std::string_view copy_stream = "copy";
inline constexpr std::array<std::string_view, 2> swap_stream_markers = {"copy", "swap"};

// A stream span with this name is a stream parked on an event, not working:
// drawn, but not counted as busy.
inline constexpr std::string_view stream_wait = "wait_event";

// Request phases (span names; flow_id = the request id).
inline constexpr std::string_view phase_queue = "queue";        // waiting for the scheduler
inline constexpr std::string_view phase_swap_in = "swap-in";    // KV blocks coming back to the GPU
inline constexpr std::string_view phase_prefill = "prefill";    // prompt tokens through the model
inline constexpr std::string_view phase_decode = "decode";      // generating tokens
inline constexpr std::string_view phase_network = "network";    // sending the answer to the client
inline constexpr std::array<std::string_view, 5> phases = {phase_queue, phase_swap_in, phase_prefill,
                                                           phase_decode, phase_network};

// Request lifecycle points (zero-length SpanKind::request spans, flow_id =
// the request id, id = the conversation id).
inline constexpr std::string_view request_arrival = "arrival";
inline constexpr std::string_view request_first_token = "first token";
inline constexpr std::string_view request_done = "done";

}  // namespace pensieve::rt::trace_names
