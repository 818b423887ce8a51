#include "net/rpc_turn.hpp"

#include "net/rpc_convert.hpp"

#include <kj/debug.h>

namespace pensieve::net {

namespace schema = rpc::schema;

RpcTurn::RpcTurn(std::shared_ptr<RpcTurnBridge> bridge, schema::TokenSink::Client sink, int max_deltas_in_flight,
                 bool logprobs, RpcDrain* drain)
    : bridge_(std::move(bridge)),
      sink_(kj::mv(sink)),
      max_in_flight_(max_deltas_in_flight < 1 ? 1 : max_deltas_in_flight),
      logprobs_(logprobs),
      ticket_(drain),
      calls_(*this),
      finished_(nullptr) {
  auto paf = kj::newPromiseAndFulfiller<void>();
  accepted_fulfiller_ = kj::mv(paf.fulfiller);
  accepted_promise_ = kj::mv(paf.promise);
  // Evaluated eagerly: deltas flow whether or not the client asked for result().
  finished_ = pump()
                  .catch_([this](kj::Exception&& e) {
                    if (!failure_) failure_.emplace(kj::mv(e));
                  })
                  .then([this] { ticket_.release(); })
                  .eagerlyEvaluate(nullptr)
                  .fork();
}

RpcTurn::~RpcTurn() {
  if (!summary_ && !failure_) bridge_->cancel();
  bridge_->events().close();
}

kj::Promise<void> RpcTurn::accepted() { return kj::mv(accepted_promise_); }

kj::Promise<void> RpcTurn::result(ResultContext context) {
  return finished_.addBranch().then([this, context]() mutable {
    if (failure_) kj::throwFatalException(kj::cp(*failure_));
    KJ_ASSERT(summary_ != std::nullopt);
    summary_to_rpc(*summary_, context.getResults().initSummary());
  });
}

// The engine's stream has been told when this returns, so a client that saw
// cancel() return knows the turn stops at the next iteration.
kj::Promise<void> RpcTurn::cancel(CancelContext) {
  bridge_->cancel();
  return kj::READY_NOW;
}

void RpcTurn::taskFailed(kj::Exception&& exception) {
  // Sink calls handle their own failures; anything else is a bug worth seeing.
  KJ_LOG(ERROR, "rpc turn task failed", exception);
}

// One step: take what the engine sent, send what the flow window allows,
// finish once the end arrived and every delta was answered; otherwise wait
// for the engine or for a sink call to return.
kj::Promise<void> RpcTurn::pump() {
  for (auto& event : bridge_->events().take()) absorb(event);
  send_pending();
  const bool ended = summary_ || failure_;
  if (ended && in_flight_ == 0 && (pending_.empty() || failure_)) return finish();
  auto paf = kj::newPromiseAndFulfiller<void>();
  poke_ = kj::mv(paf.fulfiller);
  auto woken = bridge_->events().ready().exclusiveJoin(kj::mv(paf.promise));
  return woken.then([this] { return pump(); });
}

void RpcTurn::absorb(actors::TurnEvent& event) {
  if (std::holds_alternative<actors::TurnStarted>(event)) {
    accepted_seen_ = true;
    accepted_fulfiller_->fulfill();
  } else if (auto* delta = std::get_if<actors::TurnDelta>(&event)) {
    if (!failure_) pending_.push_back(std::move(*delta));
  } else if (auto* done = std::get_if<actors::TurnDone>(&event)) {
    summary_ = std::move(*done);
  } else {
    const auto& failed = std::get<actors::TurnFailed>(event);
    if (!failure_) failure_.emplace(rpc_exception(failed.error));
    if (!accepted_seen_) accepted_fulfiller_->reject(kj::cp(*failure_));
  }
}

void RpcTurn::send_pending() {
  if (pending_.empty() || failure_ || in_flight_ >= max_in_flight_) return;
  auto request = sink_.deltasRequest();
  auto batch = request.initBatch(unsigned(pending_.size()));
  for (unsigned i = 0; i < batch.size(); ++i) delta_to_rpc(pending_[i], logprobs_, batch[i]);
  pending_.clear();
  ++in_flight_;
  calls_.add(request.send().then(
      [this](auto&&) {
        --in_flight_;
        poke();
      },
      [this](kj::Exception&& e) {
        --in_flight_;
        if (!failure_) {
          failure_.emplace(e.getType(), __FILE__, __LINE__,
                           kj::str("the token sink failed: ", e.getDescription()));
          bridge_->cancel();
        }
        poke();
      }));
}

void RpcTurn::poke() {
  if (poke_) {
    poke_->fulfill();
    poke_ = nullptr;
  }
}

kj::Promise<void> RpcTurn::finish() {
  if (failure_) return kj::READY_NOW;
  auto request = sink_.doneRequest();
  summary_to_rpc(*summary_, request.initSummary());
  // The summary stands even if the sink is gone by now.
  return request.send().then([](auto&&) {}, [](kj::Exception&&) {});
}

}  // namespace pensieve::net
