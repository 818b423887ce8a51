#pragma once
// The stand-in engine until the actor system (scheduler, conversations, swap
// engine) lands: one compute thread runs turns one at a time, each
// recomputing its whole history, with the CPU forward pass. It has the shape
// the front ends need (submit a turn, await its token stream, cancel) and
// none of the batching or KV reuse.
//
// Owns the model, tokenizer and compute thread. run_turn() may be awaited
// from any executor; deltas arrive on the caller's executor, whose context
// must outlive the engine (the compute thread completes operations on it
// until the destructor has joined it).
#include "actors/turn.hpp"
#include "gpu/model/model_weights.hpp"
#include "runtime/error.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>

#include <functional>
#include <memory>
#include <string>

namespace pensieve::actors {

struct SerialEngineOptions {
  std::size_t n_threads = 0;          // compute threads; 0: all cores
  std::string chat_template;          // override by family name; empty: the model's
  std::int32_t max_queued_turns = 64;  // beyond this, turns are refused as overloaded
  std::int32_t prefill_chunk_tokens = 256;
};

using TurnSink = std::function<boost::asio::awaitable<bool>(const TurnDelta&)>;

class SerialEngine {
 public:
  static Result<std::unique_ptr<SerialEngine>> create(model::ModelWeights weights,
                                                      SerialEngineOptions options);
  ~SerialEngine();

  const std::string& model_name() const;
  std::int32_t max_context() const;

  // Runs one turn. `sink` gets each delta; returning false cancels the turn
  // (it stops at the next token). Completes when the turn has ended.
  boost::asio::awaitable<boost::system::result<TurnSummary, TurnError>> run_turn(TurnRequest request,
                                                                                TurnSink sink);

  // Text of a token for logprobs reports (may be part of a UTF-8 character).
  std::string token_text(std::int32_t token) const;

  struct Impl;

 private:
  explicit SerialEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

[[noreturn]] inline void throw_exception_from_error(TurnError const& e, boost::source_location const&) {
  throw std::runtime_error(e.message);
}

}  // namespace pensieve::actors
