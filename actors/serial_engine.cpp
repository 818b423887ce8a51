#include "actors/serial_engine.hpp"

#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/stop_matcher.hpp"
#include "gpu/model/tokenizer.hpp"
#include "gpu/model/utf8_stream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <cassert>

namespace pensieve::actors {

namespace asio = boost::asio;
using TurnResult = boost::system::result<TurnSummary, TurnError>;

namespace {

struct Event {
  enum class Kind : std::uint8_t { delta, done, error } kind = Kind::done;
  TurnDelta delta;
  TurnSummary summary;
  TurnError error;
};

using EventChannel = asio::experimental::concurrent_channel<void(boost::system::error_code, Event)>;

// One turn in flight: the compute thread fills `channel`, the caller drains it.
struct Job {
  TurnRequest request;
  std::shared_ptr<EventChannel> channel;
  std::atomic<bool> cancelled{false};

  // The channel holds every event a turn can produce (one per token, a last
  // delta and the end), so the compute thread never waits for a client.
  void send(Event e) {
    [[maybe_unused]] const bool sent = channel->try_send(boost::system::error_code{}, std::move(e));
    assert(sent && "event channel sized for the whole turn");
  }
  void fail(TurnErrorKind kind, std::string message) {
    Event e{Event::Kind::error};
    e.error = TurnError{kind, std::move(message)};
    send(std::move(e));
  }
};

}  // namespace

struct SerialEngine::Impl {
  model::CpuForward forward;
  model::Tokenizer tokenizer;
  model::ChatTemplate chat;
  std::string name;
  SerialEngineOptions options;
  std::atomic<std::int32_t> queued{0};
  std::atomic<bool> stopping{false};
  asio::thread_pool compute{1};  // the one compute thread; turns run in arrival order

  void run(Job& job);
  Result<std::vector<std::int32_t>> prompt_tokens(const TurnRequest& r) const;
  bool prefill(Job& job, std::span<const std::int32_t> prompt, model::ContiguousKvCache& kv,
               model::ForwardOutput& out);
  void generate(Job& job, std::span<const std::int32_t> prompt, model::ContiguousKvCache& kv,
                model::ForwardOutput out);
  bool cancelled(const Job& job) const { return job.cancelled || stopping; }
};

Result<std::vector<std::int32_t>> SerialEngine::Impl::prompt_tokens(const TurnRequest& r) const {
  auto text = chat.render(r.messages, true);
  if (!text) return text.error();
  return tokenizer.encode(*text, model::EncodeOptions{tokenizer.adds_bos_by_default(), true});
}

bool SerialEngine::Impl::prefill(Job& job, std::span<const std::int32_t> prompt,
                                 model::ContiguousKvCache& kv, model::ForwardOutput& out) {
  const std::size_t chunk = std::size_t(std::max(1, options.prefill_chunk_tokens));
  for (std::size_t start = 0; start < prompt.size(); start += chunk) {
    if (cancelled(job)) return false;
    model::ForwardSequence seq{prompt.subspan(start, std::min(chunk, prompt.size() - start)),
                               std::int32_t(start), &kv, false};
    auto r = forward.forward(std::span(&seq, 1));
    if (!r) {
      job.fail(TurnErrorKind::internal, r.error().message);
      return false;
    }
    out = std::move(*r);
  }
  return true;
}

void SerialEngine::Impl::generate(Job& job, std::span<const std::int32_t> prompt,
                                  model::ContiguousKvCache& kv, model::ForwardOutput out) {
  const auto& params = job.request.sampling;
  model::VocabInfo vocab{forward.config().vocab_size, {}};
  for (auto id : {tokenizer.eos_id(), tokenizer.eot_id()}) {
    if (id) vocab.eos_ids.push_back(*id);
  }
  model::Sampler sampler(params, vocab, prompt);
  model::Utf8Stream utf8;
  model::StopMatcher stops(params.stop_strings);
  TurnSummary summary{model::FinishReason::none, std::int32_t(prompt.size()), 0, 0, false};
  TurnDelta pending;
  for (;;) {
    model::SampledToken t = sampler.sample(out.last(0));
    const std::int32_t token = t.token;
    ++summary.completion_tokens;
    model::FinishReason finish = sampler.finish_reason(token);
    if (finish != model::FinishReason::stop) {  // a stop token is not part of the reply
      const std::string piece = tokenizer.is_special(token) ? std::string() : tokenizer.token_to_piece(token);
      model::StopStep step = stops.push(utf8.feed(piece));
      pending.text += step.released;
      if (params.logprobs) pending.tokens.push_back(std::move(t));
      if (step.stopped) finish = model::FinishReason::stop;
    }
    if (finish != model::FinishReason::none || cancelled(job)) {
      if (!stops.stopped()) {
        model::StopStep step = stops.push(utf8.flush());
        pending.text += step.released;
        if (step.stopped) {
          finish = model::FinishReason::stop;
        } else {
          pending.text += stops.flush();
        }
      }
      if (!pending.text.empty() || !pending.tokens.empty()) job.send(Event{Event::Kind::delta, std::move(pending)});
      summary.finish = finish == model::FinishReason::none ? model::FinishReason::stop : finish;
      summary.cancelled = finish == model::FinishReason::none;
      Event done{Event::Kind::done};
      done.summary = summary;
      return job.send(std::move(done));
    }
    if (!pending.text.empty()) job.send(Event{Event::Kind::delta, std::exchange(pending, {})});
    model::ForwardSequence seq{std::span(&token, 1), kv.size_tokens(), &kv, false};
    auto r = forward.forward(std::span(&seq, 1));
    if (!r) return job.fail(TurnErrorKind::internal, r.error().message);
    out = std::move(*r);
  }
}

void SerialEngine::Impl::run(Job& job) {
  if (cancelled(job)) {
    Event done{Event::Kind::done};
    done.summary.cancelled = true;
    return job.send(std::move(done));
  }
  auto prompt = prompt_tokens(job.request);
  if (!prompt) return job.fail(TurnErrorKind::invalid_request, prompt.error().message);
  const std::int64_t needed = std::int64_t(prompt->size()) + job.request.sampling.max_tokens;
  if (needed > forward.config().max_context) {
    return job.fail(TurnErrorKind::invalid_request,
                    "this model's context is " + std::to_string(forward.config().max_context) +
                        " tokens; the conversation has " + std::to_string(prompt->size()) +
                        " and max_tokens asks for " + std::to_string(job.request.sampling.max_tokens));
  }
  model::ContiguousKvCache kv = forward.make_kv_cache(std::int32_t(needed));
  model::ForwardOutput out;
  if (!prefill(job, *prompt, kv, out)) {
    if (!cancelled(job)) return;  // prefill reported its error
    Event done{Event::Kind::done};
    done.summary.cancelled = true;
    done.summary.prompt_tokens = std::int32_t(prompt->size());
    return job.send(std::move(done));
  }
  generate(job, *prompt, kv, std::move(out));
}

SerialEngine::SerialEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SerialEngine::~SerialEngine() {
  impl_->stopping = true;
  impl_->compute.join();
}

Result<std::unique_ptr<SerialEngine>> SerialEngine::create(model::ModelWeights weights,
                                                           SerialEngineOptions options) {
  if (!weights.tokenizer) return fail("the model has no tokenizer; a chat server needs one");
  auto tokenizer = model::Tokenizer::from_data(*weights.tokenizer);
  if (!tokenizer) return tokenizer.error();
  auto chat = model::chat_template_for(*tokenizer, options.chat_template);
  if (!chat) return chat.error();
  std::string name = weights.config.name.empty() ? "pensieve" : weights.config.name;
  auto forward = model::CpuForward::create(std::move(weights), {.n_threads = options.n_threads});
  if (!forward) return forward.error();
  auto impl = std::unique_ptr<Impl>(new Impl{std::move(*forward), std::move(*tokenizer),
                                             std::move(*chat), std::move(name), options});
  return std::unique_ptr<SerialEngine>(new SerialEngine(std::move(impl)));
}

const std::string& SerialEngine::model_name() const { return impl_->name; }

std::int32_t SerialEngine::max_context() const { return impl_->forward.config().max_context; }

std::string SerialEngine::token_text(std::int32_t token) const {
  return impl_->tokenizer.token_to_piece(token);
}

asio::awaitable<TurnResult> SerialEngine::run_turn(TurnRequest request, TurnSink sink) {
  if (auto problem = model::validate(request.sampling); !problem.empty()) {
    co_return TurnError{TurnErrorKind::invalid_request, problem};
  }
  if (impl_->queued.fetch_add(1) >= impl_->options.max_queued_turns) {
    impl_->queued.fetch_sub(1);
    co_return TurnError{TurnErrorKind::overloaded,
                        "the server is overloaded: " + std::to_string(impl_->options.max_queued_turns) +
                            " turns are queued; retry later"};
  }
  auto job = std::make_shared<Job>();
  const std::size_t capacity = std::size_t(std::max(0, request.sampling.max_tokens)) + 8;
  job->request = std::move(request);
  job->channel = std::make_shared<EventChannel>(co_await asio::this_coro::executor, capacity);
  asio::post(impl_->compute, [impl = impl_.get(), job] {
    impl->run(*job);
    impl->queued.fetch_sub(1);
  });
  // If this coroutine is abandoned (client gone, server stopping), the turn
  // stops at its next token.
  struct CancelOnExit {
    Job& job;
    ~CancelOnExit() { job.cancelled = true; }
  } cancel_on_exit{*job};
  for (;;) {
    auto [ec, event] = co_await job->channel->async_receive(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return TurnError{TurnErrorKind::internal, "turn stream broken: " + ec.message()};
    switch (event.kind) {
      case Event::Kind::delta:
        if (!job->cancelled) {
          const bool keep_going = co_await sink(event.delta);  // not inside &&: GCC 12 bug
          if (!keep_going) job->cancelled = true;
        }
        break;
      case Event::Kind::done: co_return event.summary;
      case Event::Kind::error: co_return event.error;
    }
  }
}

}  // namespace pensieve::actors
