#pragma once
// call_engine(): runs an engine operation on the engine's Asio executor and
// answers on the Cap'n Proto loop's thread, so the loop never blocks on the
// engine (nor the engine on the loop).
#include "actors/engine.hpp"
#include "net/rpc_inbox.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <exception>
#include <functional>
#include <memory>

namespace pensieve::net {

// `op` runs on `executor`; the returned promise resolves on the calling (loop)
// thread, woken through `waker`. A throwing op answers an internal TurnError.
template <class T>
kj::Promise<actors::EngineResult<T>> call_engine(const boost::asio::any_io_executor& executor,
                                                 const std::shared_ptr<RpcLoopWaker>& waker, std::function<boost::asio::awaitable<actors::EngineResult<T>>()> op) {
  using R = actors::EngineResult<T>;
  auto inbox = std::make_shared<RpcInbox<R>>(waker);
  boost::asio::co_spawn(
      executor,
      [inbox, op = std::move(op)]() -> boost::asio::awaitable<void> {
        std::optional<R> result;
        try {
          result.emplace(co_await op());
        } catch (const std::exception& e) {
          result.emplace(actors::TurnError{actors::TurnErrorKind::internal, e.what()});
        }
        inbox->push(std::move(*result));
      },
      boost::asio::detached);
  auto ready = inbox->ready();
  return ready.then([inbox]() -> R {
    auto items = inbox->take();
    return std::move(items.front());
  });
}

}  // namespace pensieve::net
