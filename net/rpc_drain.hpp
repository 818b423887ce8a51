#pragma once
// RpcDrain: what lets a stopping RPC server finish its turns. It counts the
// turns whose reply is still being delivered (from sendTurn until their
// sink's done() returned, they failed, or their capability was dropped);
// once refusing, sendTurn refuses new turns, and drained() resolves when the
// count reaches zero.
//
// Shared by the server, its services and their turns; the Cap'n Proto loop's
// thread only, but for refuse_new_turns() and refusing(): any thread, so that
// a turn asked for after RpcServer::shutdown() returned is refused.
#include <kj/async.h>

#include <atomic>
#include <cstddef>

namespace pensieve::net {

class RpcDrain {
 public:
  void refuse_new_turns() { refusing_.store(true, std::memory_order_release); }
  bool refusing() const { return refusing_.load(std::memory_order_acquire); }
  std::size_t open_turns() const { return open_; }

  void turn_began() { ++open_; }
  void turn_ended() {
    if (--open_ == 0 && idle_) {
      idle_->fulfill();
      idle_ = nullptr;
    }
  }

  // Drops the drained() promise's fulfiller: before the event loop goes.
  void abandon() { idle_ = nullptr; }

  // Refuses new turns (for good); resolves once no turn is open. Call once.
  kj::Promise<void> drained() {
    refuse_new_turns();
    if (open_ == 0) return kj::READY_NOW;
    auto paf = kj::newPromiseAndFulfiller<void>();
    idle_ = kj::mv(paf.fulfiller);
    return kj::mv(paf.promise);
  }

 private:
  std::size_t open_ = 0;
  std::atomic<bool> refusing_{false};
  kj::Own<kj::PromiseFulfiller<void>> idle_;
};

// Ends one turn's count exactly once, however the turn ends.
class RpcDrainTicket {
 public:
  explicit RpcDrainTicket(RpcDrain* drain) : drain_(drain) {
    if (drain_) drain_->turn_began();
  }
  ~RpcDrainTicket() { release(); }
  RpcDrainTicket(const RpcDrainTicket&) = delete;
  RpcDrainTicket& operator=(const RpcDrainTicket&) = delete;

  void release() {
    if (drain_) drain_->turn_ended();
    drain_ = nullptr;
  }

 private:
  RpcDrain* drain_;
};

}  // namespace pensieve::net
