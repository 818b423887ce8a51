#pragma once
// Conversions between the RPC schema (schemas/pensieve.capnp) and the
// engine's types, and the engine's errors as RPC exceptions. Pure functions;
// any thread.
#include "actors/engine.hpp"
#include "runtime/error.hpp"
#include "schemas/pensieve.capnp.h"

#include <kj/exception.h>

namespace pensieve::net {

// The request's sampling parameters, checked: temperature >= 0, top_p in
// (0, 1], min_p in [0, 1], top_k >= 0, 1 <= max_tokens, 0 <= min_tokens <= max_tokens.
Result<model::SamplingParams> sampling_from_rpc(rpc::schema::SamplingParams::Reader params);

// "not found: ...", "invalid request: ...", "overloaded: ..." (type
// OVERLOADED), "internal: ...".
kj::Exception rpc_exception(const actors::TurnError& error);
kj::Exception rpc_invalid_request(const std::string& message);

void summary_to_rpc(const actors::TurnSummary& summary, rpc::schema::TurnSummary::Builder out);
void delta_to_rpc(const actors::TurnDelta& delta, bool logprobs, rpc::schema::Delta::Builder out);
void stats_to_rpc(const actors::SchedulerStats& stats, rpc::schema::Stats::Builder out);

}  // namespace pensieve::net
