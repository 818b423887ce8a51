#pragma once
// Conversions between the RPC schema (schemas/pensieve.capnp) and the
// engine's types, and the engine's errors as RPC exceptions. Pure functions;
// any thread.
#include "actors/engine.hpp"
#include "net/turn_call.hpp"
#include "runtime/error.hpp"
#include "schemas/pensieve.capnp.h"

#include <capnp/message.h>
#include <kj/exception.h>

#include <cstddef>
#include <string>

namespace pensieve::net {

// The request's sampling parameters as sent; their bounds are the
// adapter's (validate_turn in net/turn_call.hpp), as every front end's.
model::SamplingParams sampling_from_rpc(rpc::schema::SamplingParams::Reader params);

// The largest user message a sendTurn call may carry: the HTTP front end's
// body limit (HttpServerOptions::max_body_bytes), so no port takes more.
inline constexpr std::size_t rpc_max_content_bytes = std::size_t(1) << 20;

// A sendTurn call's data as a turn of `tenant`'s, checked as every front
// end's turn is (validate_turn); the error (invalid_request) names the
// bound broken. Lists are measured before they are copied, so a huge stop
// list costs nothing. Reads only the message's data, never its sink. A
// malformed message throws kj::Exception (the RPC system answers the call
// with it).
actors::EngineResult<actors::TurnRequest> turn_from_rpc(rpc::schema::Pensieve::SendTurnParams::Reader params,
                                                        const std::string& tenant, const RequestLimits& limits);

// What the server's connections accept of a message: a sendTurn at its
// largest with room to spare, so a client cannot make the server hold more
// than that per message (Cap'n Proto's default is 64 MiB).
capnp::ReaderOptions rpc_reader_options();

// "<prefix>: <message>" with the prefix and the exception type of
// error_protocol(): "invalid request: ...", "not found: ...",
// "overloaded: ..." (type OVERLOADED), "timeout: ...", "internal: ...".
kj::Exception rpc_exception(const actors::TurnError& error);
kj::Exception rpc_invalid_request(const std::string& message);

void summary_to_rpc(const actors::TurnDone& summary, rpc::schema::TurnSummary::Builder out);
void delta_to_rpc(const actors::TurnDelta& delta, bool logprobs, rpc::schema::Delta::Builder out);
void stats_to_rpc(const actors::SchedulerStats& stats, rpc::schema::Stats::Builder out);

}  // namespace pensieve::net
