#pragma once
// Conversions between the RPC schema (schemas/pensieve.capnp) and the
// engine's types, and the engine's errors as RPC exceptions. Pure functions;
// any thread.
#include "actors/engine.hpp"
#include "net/turn_call.hpp"
#include "runtime/error.hpp"
#include "schemas/pensieve.capnp.h"

#include <kj/exception.h>

namespace pensieve::net {

// The request's sampling parameters as sent; their bounds are the
// adapter's (validate_turn in net/turn_call.hpp), as every front end's.
model::SamplingParams sampling_from_rpc(rpc::schema::SamplingParams::Reader params);

// "<prefix>: <message>" with the prefix and the exception type of
// error_protocol(): "invalid request: ...", "not found: ...",
// "overloaded: ..." (type OVERLOADED), "timeout: ...", "internal: ...".
kj::Exception rpc_exception(const actors::TurnError& error);
kj::Exception rpc_invalid_request(const std::string& message);

void summary_to_rpc(const actors::TurnDone& summary, rpc::schema::TurnSummary::Builder out);
void delta_to_rpc(const actors::TurnDelta& delta, bool logprobs, rpc::schema::Delta::Builder out);
void stats_to_rpc(const actors::SchedulerStats& stats, rpc::schema::Stats::Builder out);

}  // namespace pensieve::net
