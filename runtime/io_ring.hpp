#pragma once
// IoRing: one io_uring whose completions arrive through an eventfd watched
// by Asio, so an I/O completes a coroutine instead of blocking a thread.
//
// Ownership and threads: the ring lives on one executor (give it a
// single-threaded io_context or a strand); submissions are dispatched onto
// it and completions are reaped there, then each handler is posted to its
// own associated executor. While operations are in flight the eventfd wait
// holds a reference to the ring, so it outlives them; with nothing in flight
// it holds nothing and io_context::run() may return. Callers keep their
// buffers alive until the operation completes (an awaiting coroutine does).
#include "runtime/error.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <liburing.h>

#include <cstdint>
#include <deque>
#include <memory>

namespace pensieve::rt {

// One read, write or fsync. `result` of its completion is the CQE's res:
// bytes transferred, or -errno.
struct IoRequest {
  enum class Opcode : std::uint8_t { read, write, fsync } opcode = Opcode::read;
  int fd = -1;
  void* buffer = nullptr;  // read: destination; write: source (not modified)
  std::uint32_t length_bytes = 0;
  std::uint64_t offset_bytes = 0;
};

class IoRing : public std::enable_shared_from_this<IoRing> {
 public:
  // Fails with a clear Error where io_uring is unavailable (an old kernel, a
  // seccomp policy that forbids it) or an eventfd cannot be made.
  static Result<std::shared_ptr<IoRing>> create(boost::asio::any_io_executor executor,
                                                unsigned queue_entries = 256);
  ~IoRing();  // waits for operations still in flight (their buffers are in use)
  IoRing(const IoRing&) = delete;
  IoRing& operator=(const IoRing&) = delete;

  boost::asio::any_io_executor get_executor() const { return executor_; }
  std::size_t in_flight() const noexcept { return in_flight_; }  // on the ring's executor

  // Submits `request`; completes `token` with the CQE result. Signature:
  // void(int).
  template <class Token = boost::asio::use_awaitable_t<>>
  auto submit(IoRequest request, Token&& token = {}) {
    return boost::asio::async_initiate<Token, void(int)>(
        [self = shared_from_this()](auto handler, IoRequest req) {
          // The handler's executor counts this operation as outstanding work
          // until it completes, so its io_context does not run dry meanwhile.
          boost::asio::any_io_executor handler_executor = boost::asio::prefer(
              boost::asio::get_associated_executor(handler, self->executor_),
              boost::asio::execution::outstanding_work.tracked);
          boost::asio::dispatch(self->executor_, [self, req, handler_executor,
                                                  h = std::move(handler)]() mutable {
            self->start(Op{req, Handler(std::move(h)), std::move(handler_executor)});
          });
        },
        token, request);
  }

 private:
  using Handler = boost::asio::any_completion_handler<void(int)>;
  struct Op {
    IoRequest request;
    Handler handler;
    boost::asio::any_io_executor handler_executor;  // tracks work; the handler runs there
  };

  IoRing(boost::asio::any_io_executor executor, int event_fd);
  void start(Op op);
  bool try_submit(std::unique_ptr<Op>& op);  // false: no room yet, keep it pending
  void arm();
  void on_ready();
  void reap();
  static void complete(Op& op, int result);

  boost::asio::any_io_executor executor_;
  io_uring ring_{};
  bool ring_ready_ = false;
  boost::asio::posix::stream_descriptor event_fd_;
  unsigned capacity_ = 0;      // ops allowed in flight: the CQ size, so it never overflows
  std::size_t in_flight_ = 0;  // submitted, CQE not yet reaped
  bool armed_ = false;         // an eventfd wait is outstanding
  std::deque<std::unique_ptr<Op>> pending_;  // waiting for room in the ring
};

}  // namespace pensieve::rt
