#pragma once
// Turn shorthands for the engine tests, each one Engine::start() drained
// into a sink.
#include "actors/engine.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/this_coro.hpp>

#include <optional>
#include <string>
#include <vector>

namespace pensieve::testing {

// A turn on a stored conversation that must exist already.
inline boost::asio::awaitable<actors::TurnResult> send_turn(
    actors::Engine& engine, std::string tenant, std::string id,
    std::vector<model::ChatMessage> messages, model::SamplingParams sampling,
    actors::TurnSink sink) {
  actors::TurnRequest request;
  request.tenant = std::move(tenant);
  request.conversation = std::move(id);
  request.create_conversation = false;
  request.messages = std::move(messages);
  request.sampling = std::move(sampling);
  auto executor = co_await boost::asio::this_coro::executor;
  auto stream = engine.start(executor, std::move(request));
  if (!stream) co_return stream.error();
  co_return co_await actors::drain_turn(std::move(*stream), std::move(sink));
}

// A stateless turn: the whole history, no conversation id.
inline actors::TurnRequest stateless_request(std::vector<model::ChatMessage> messages,
                                             model::SamplingParams sampling) {
  actors::TurnRequest request;
  request.tenant = "t";
  request.messages = std::move(messages);
  request.sampling = std::move(sampling);
  return request;
}

// A raw text completion.
inline boost::asio::awaitable<actors::TurnResult> run_completion(actors::Engine& engine,
                                                                 std::string prompt,
                                                                 model::SamplingParams sampling,
                                                                 actors::TurnSink sink) {
  actors::TurnRequest request;
  request.tenant = "t";
  request.prompt = std::move(prompt);
  request.sampling = std::move(sampling);
  auto executor = co_await boost::asio::this_coro::executor;
  auto stream = engine.start(executor, std::move(request));
  if (!stream) co_return stream.error();
  co_return co_await actors::drain_turn(std::move(*stream), std::move(sink));
}

}  // namespace pensieve::testing
