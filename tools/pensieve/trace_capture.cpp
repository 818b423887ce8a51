#include "tools/pensieve/trace_capture.hpp"

#include "tools/pensieve-trace/export_chrome.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

namespace pensieve::server {

namespace asio = boost::asio;

net::ApiResult<std::string> export_chrome_json(rt::TraceFile file) {
  auto trace = tools::trace::arrange_trace(std::move(file));
  if (!trace) return net::ApiError{500, "server_error", "trace: " + trace.error().message, {}, {}};
  return boost::json::serialize(tools::trace::chrome_trace_json(*trace));
}

void TraceCapturer::stop() {
  if (timer_ != nullptr) timer_->cancel();
}

asio::awaitable<net::ApiResult<std::string>> TraceCapturer::capture(std::chrono::seconds duration) {
  if (to_file_) {
    co_return net::ApiError{409, "invalid_request_error", "the server already records to its --trace file", {},
                            "trace_busy"};
  }
  if (busy_) co_return net::ApiError{409, "invalid_request_error", "a trace is already being recorded", {}, "trace_busy"};
  busy_ = true;
  (void)tracer_.drain();  // whatever an earlier recording left behind
  tracer_.enable();
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(duration);
  timer_ = &timer;
  auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  (void)ec;  // cancelled (the server stops): answer what was recorded so far
  timer_ = nullptr;
  tracer_.disable();
  rt::TraceFile file;
  file.header = tracer_.header();
  file.spans = tracer_.drain();
  busy_ = false;
  co_return export_chrome_json(std::move(file));
}

}  // namespace pensieve::server
