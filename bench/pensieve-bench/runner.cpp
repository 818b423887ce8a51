#include "bench/pensieve-bench/runner.hpp"

#include "bench/pensieve-bench/chat_connection.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <chrono>

namespace pensieve::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;

namespace {

// Shared by the run's coroutines, all on one thread.
struct RunState {
  const RunConfig& config;
  const Workload& workload;
  asio::ip::tcp::endpoint endpoint;
  Clock::time_point start;
  std::optional<Clock::time_point> deadline;
  std::vector<RequestRecord> records;
  std::size_t next_conversation = 0;  // concurrency mode
  std::size_t started = 0;
  std::size_t finished = 0;
  std::size_t in_flight = 0;
  std::size_t live = 0;  // spawned arrival or worker coroutines still running
  std::exception_ptr fault;

  double now_s() const { return std::chrono::duration<double>(Clock::now() - start).count(); }
  bool past_deadline() const { return ends_after_deadline(Clock::now()); }
  bool ends_after_deadline(Clock::time_point t) const { return deadline && t >= *deadline; }
};

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

RequestRecord make_record(std::size_t conversation, std::size_t turn, double start_s, std::int32_t max_tokens,
                          const ChatExchange& x) {
  RequestRecord r;
  r.conversation = conversation;
  r.turn = turn;
  r.start_s = start_s;
  r.max_tokens = max_tokens;
  r.ttft_s = x.stream.first_token_s();
  r.inter_token_s = x.stream.inter_token_s();
  r.e2e_s = x.e2e_s;
  r.error = x.error;
  if (const auto& u = x.stream.usage()) {
    r.usage_reported = true;
    r.prompt_tokens = u->prompt_tokens;
    r.completion_tokens = u->completion_tokens;
    r.cached_tokens = u->cached_tokens;
  } else {
    r.completion_tokens = x.stream.content_events();
  }
  return r;
}

std::string request_body(const RunState& s, const PlannedConversation& pc, const PlannedTurn& turn,
                         const std::vector<DatasetMessage>& history, std::size_t index) {
  RequestSpec spec;
  spec.model = s.config.model;
  spec.mode = s.config.mode;
  spec.conversation_id = s.config.conversation_prefix + "-" + std::to_string(index) + "-" + pc.id;
  spec.history = &history;
  spec.new_messages = &turn.new_messages;
  spec.max_tokens = turn.max_tokens;
  return chat_request_body(spec);
}

asio::awaitable<void> run_conversation(RunState& s, std::size_t index) {
  auto executor = co_await asio::this_coro::executor;
  const PlannedConversation& pc = s.workload.conversations[index];
  ChatConnection connection(executor, s.endpoint, s.config.target.host);
  asio::steady_timer timer(executor);
  std::vector<DatasetMessage> history;
  const std::string path = s.config.target.chat_path();
  const Clock::duration timeout = seconds(s.config.request_timeout_s);
  ++s.started;
  for (std::size_t t = 0; t < pc.turns.size(); ++t) {
    const PlannedTurn& turn = pc.turns[t];
    if (turn.think_s > 0) {
      if (s.ends_after_deadline(Clock::now() + seconds(turn.think_s))) break;
      timer.expires_after(seconds(turn.think_s));
      co_await timer.async_wait(asio::use_awaitable);
    }
    if (s.past_deadline()) break;
    const std::string body = request_body(s, pc, turn, history, index);
    const double start_s = s.now_s();
    ++s.in_flight;
    const ChatExchange x = co_await connection.post_stream(path, body, timeout);
    --s.in_flight;
    s.records.push_back(make_record(index, t, start_s, turn.max_tokens, x));
    if (!x.error.empty()) break;  // the history would no longer match the server's
    history.insert(history.end(), turn.new_messages.begin(), turn.new_messages.end());
    history.push_back({"assistant", x.stream.text()});
  }
  ++s.finished;
}

asio::awaitable<void> arrive(RunState& s, std::size_t index, double arrival_s) {
  const Clock::time_point at = s.start + seconds(arrival_s);
  if (s.ends_after_deadline(at)) co_return;  // not waited for: the run ends first
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  timer.expires_at(at);
  co_await timer.async_wait(asio::use_awaitable);
  co_await run_conversation(s, index);
}

asio::awaitable<void> worker(RunState& s) {
  while (s.next_conversation < s.workload.conversations.size() && !s.past_deadline()) {
    const std::size_t index = s.next_conversation++;
    co_await run_conversation(s, index);
  }
}

asio::awaitable<void> report_progress(RunState& s) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  const std::size_t total = s.workload.conversations.size();
  while (s.live > 0 && !s.fault) {
    std::int64_t tokens = 0;
    std::size_t errors = 0;
    for (const auto& r : s.records) {
      tokens += r.completion_tokens;
      errors += !r.error.empty();
    }
    const double t = s.now_s();
    std::fprintf(s.config.progress,
                 "\r[%s] %6.1fs  conversations %zu/%zu started, %zu done  requests %zu (%zu in flight, "
                 "%zu errors)  %.1f tok/s   ",
                 s.config.target.label.c_str(), t, s.started, total, s.finished, s.records.size(), s.in_flight,
                 errors, t > 0 ? double(tokens) / t : 0.0);
    std::fflush(s.config.progress);
    timer.expires_after(std::chrono::milliseconds(500));
    co_await timer.async_wait(asio::use_awaitable);
  }
  std::fprintf(s.config.progress, "\n");
}

Result<asio::ip::tcp::endpoint> resolve(asio::io_context& io, const Target& target) {
  asio::ip::tcp::resolver resolver(io);
  boost::system::error_code ec;
  auto results = resolver.resolve(target.host, std::to_string(target.port), ec);
  if (ec || results.empty()) return fail(target.url + ": cannot resolve " + target.host + ": " + ec.message());
  return results.begin()->endpoint();
}

}  // namespace

Result<RunRecords> run_load(const RunConfig& config, const Workload& workload) {
  asio::io_context io(1);
  auto endpoint = resolve(io, config.target);
  if (!endpoint) return endpoint.error();
  RunState s{config, workload, *endpoint, Clock::now(), std::nullopt, {}, 0, 0, 0, 0, 0, nullptr};
  if (config.duration_s > 0) s.deadline = s.start + seconds(config.duration_s);
  auto on_done = [&s](std::exception_ptr e) {
    --s.live;
    if (e && !s.fault) s.fault = e;
  };
  if (config.load.concurrency) {
    for (std::size_t i = 0; i < *config.load.concurrency; ++i) {
      ++s.live;
      asio::co_spawn(io, worker(s), on_done);
    }
  } else {
    const double rate = config.load.rate_per_s.value_or(1.0);
    for (std::size_t i = 0; i < workload.conversations.size(); ++i) {
      ++s.live;
      asio::co_spawn(io, arrive(s, i, workload.conversations[i].unit_arrival_s / rate), on_done);
    }
  }
  if (config.progress) {
    asio::co_spawn(io, report_progress(s), [&s](std::exception_ptr e) {
      if (e && !s.fault) s.fault = e;
    });
  }
  io.run();
  if (s.fault) {
    try {
      std::rethrow_exception(s.fault);
    } catch (const std::exception& e) {
      return fail(config.target.url + ": the run failed: " + e.what());
    }
  }
  RunRecords out;
  out.duration_s = 0.0;
  for (const auto& r : s.records) out.duration_s = std::max(out.duration_s, r.start_s + r.e2e_s);
  out.requests = std::move(s.records);
  out.conversations_started = s.started;
  return out;
}

Result<std::string> discover_model(const Target& target, double timeout_s) {
  asio::io_context io(1);
  auto endpoint = resolve(io, target);
  if (!endpoint) return endpoint.error();
  beast::tcp_stream stream(io);
  stream.expires_after(seconds(timeout_s));
  beast::error_code ec;
  stream.connect(*endpoint, ec);
  if (ec) return fail(target.url + ": cannot connect: " + ec.message());
  http::request<http::empty_body> req{http::verb::get, target.models_path(), 11};
  req.set(http::field::host, target.host);
  http::write(stream, req, ec);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  if (!ec) http::read(stream, buffer, res, ec);
  if (ec) return fail(target.url + ": GET " + target.models_path() + ": " + ec.message());
  if (res.result_int() != 200) {
    return fail(target.url + ": GET " + target.models_path() + " answered " + std::to_string(res.result_int()));
  }
  boost::system::error_code jec;
  const boost::json::value doc = boost::json::parse(res.body(), jec);
  const boost::json::value* data = jec || !doc.is_object() ? nullptr : doc.get_object().if_contains("data");
  if (data && data->is_array() && !data->get_array().empty() && data->get_array()[0].is_object()) {
    const boost::json::value* id = data->get_array()[0].get_object().if_contains("id");
    if (id && id->is_string()) return std::string(id->get_string());
  }
  return fail(target.url + ": GET " + target.models_path() + " lists no model; pass --model");
}

}  // namespace pensieve::bench
