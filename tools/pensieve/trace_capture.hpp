#pragma once
// TraceCapture for POST /admin/trace: enables the server's Tracer for the
// asked duration, then drains what was recorded and exports it as Chrome
// trace-event JSON (pensieve-trace's export, so the answer is what
// `pensieve-trace export` makes of a file). One recording at a time; none
// while the server records to a --trace file (both would drain the same
// rings): those answer 409.
//
// Owns no thread: capture() runs on the HTTP server's executor, and the
// Tracer must outlive it.
#include "net/admin_routes.hpp"
#include "runtime/trace.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <string>

namespace pensieve::server {

class TraceCapturer {
 public:
  // `recording_to_file`: the server records to a --trace file all along.
  TraceCapturer(rt::Tracer& tracer, bool recording_to_file) : tracer_(tracer), to_file_(recording_to_file) {}

  boost::asio::awaitable<net::ApiResult<std::string>> capture(std::chrono::seconds duration);
  // Ends a recording in progress now (the server stops): it answers what it has.
  void stop();

 private:
  rt::Tracer& tracer_;
  bool to_file_;
  bool busy_ = false;                          // on the executor only
  boost::asio::steady_timer* timer_ = nullptr;  // the running recording's, on the executor only
};

// The spans of a finished recording as Chrome trace-event JSON text.
net::ApiResult<std::string> export_chrome_json(rt::TraceFile file);

}  // namespace pensieve::server
