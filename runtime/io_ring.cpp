// In-flight operations are capped at the completion queue's size, so the CQ
// never overflows; the rest wait in `pending_`. Each submission enters the
// kernel at once (io_uring_submit), so the submission queue never fills.
#include "runtime/io_ring.hpp"

#include <boost/asio/post.hpp>

#include <cerrno>
#include <cstring>
#include <string>
#include <sys/eventfd.h>
#include <unistd.h>
#include <vector>

namespace pensieve::rt {
namespace {

std::string errno_text(int error) { return std::strerror(error); }

void prepare(io_uring_sqe* sqe, const IoRequest& r) {
  switch (r.opcode) {
    case IoRequest::Opcode::read:
      io_uring_prep_read(sqe, r.fd, r.buffer, r.length_bytes, r.offset_bytes);
      break;
    case IoRequest::Opcode::write:
      io_uring_prep_write(sqe, r.fd, r.buffer, r.length_bytes, r.offset_bytes);
      break;
    case IoRequest::Opcode::fsync:
      io_uring_prep_fsync(sqe, r.fd, 0);
      break;
  }
}

}  // namespace

Result<std::shared_ptr<IoRing>> IoRing::create(boost::asio::any_io_executor executor,
                                               unsigned queue_entries) {
  const int event_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd < 0) return fail("io_uring: eventfd failed: " + errno_text(errno));
  std::shared_ptr<IoRing> ring;
  try {
    ring.reset(new IoRing(std::move(executor), event_fd));
  } catch (const boost::system::system_error& e) {
    ::close(event_fd);
    return fail(std::string("io_uring: cannot watch the eventfd: ") + e.what());
  }
  int rc = io_uring_queue_init(queue_entries, &ring->ring_, 0);
  if (rc < 0) {
    return fail("io_uring unavailable: io_uring_queue_init(" + std::to_string(queue_entries) +
                ") failed: " + errno_text(-rc));
  }
  ring->ring_ready_ = true;
  rc = io_uring_register_eventfd(&ring->ring_, event_fd);
  if (rc < 0) return fail("io_uring: io_uring_register_eventfd failed: " + errno_text(-rc));
  ring->capacity_ = ring->ring_.cq.ring_entries;
  return ring;
}

IoRing::IoRing(boost::asio::any_io_executor executor, int event_fd)
    : executor_(std::move(executor)), event_fd_(executor_, event_fd) {}

IoRing::~IoRing() {
  pending_.clear();  // never submitted: their handlers are destroyed, not called
  if (!ring_ready_) return;
  // Only reached with operations in flight when their executor was destroyed
  // unrun; the kernel may still be using their buffers, so wait them out.
  while (in_flight_ > 0) {
    io_uring_cqe* cqe = nullptr;
    const int rc = io_uring_wait_cqe(&ring_, &cqe);
    if (rc == -EINTR) continue;
    if (rc < 0) break;
    std::unique_ptr<Op> op(static_cast<Op*>(io_uring_cqe_get_data(cqe)));
    io_uring_cqe_seen(&ring_, cqe);
    if (op != nullptr) --in_flight_;
  }
  io_uring_queue_exit(&ring_);
}

void IoRing::start(Op op) {
  auto owned = std::make_unique<Op>(std::move(op));
  if (!pending_.empty() || !try_submit(owned)) pending_.push_back(std::move(owned));
  arm();
}

bool IoRing::try_submit(std::unique_ptr<Op>& op) {
  if (in_flight_ >= capacity_) return false;
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) return false;
  prepare(sqe, op->request);
  io_uring_sqe_set_data(sqe, op.get());
  const int rc = io_uring_submit(&ring_);
  if (rc < 1) {
    // The kernel took nothing: neutralise the entry so a later submit cannot
    // complete a freed Op, and fail this one.
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data(sqe, nullptr);
    complete(*op, rc < 0 ? rc : -EAGAIN);
    op.reset();
    return true;
  }
  op.release();  // owned by the kernel until its CQE is reaped
  ++in_flight_;
  return true;
}

void IoRing::arm() {
  if (armed_ || in_flight_ == 0) return;
  armed_ = true;
  event_fd_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                       [self = shared_from_this()](const boost::system::error_code& ec) {
                         self->armed_ = false;
                         if (!ec) self->on_ready();
                       });
}

void IoRing::on_ready() {
  std::uint64_t count = 0;
  // EAGAIN (already drained) is harmless: the CQ is the source of truth.
  [[maybe_unused]] const ssize_t n = ::read(event_fd_.native_handle(), &count, sizeof count);
  reap();
  while (!pending_.empty() && try_submit(pending_.front())) pending_.pop_front();
  arm();
}

void IoRing::reap() {
  std::vector<std::pair<std::unique_ptr<Op>, int>> done;
  io_uring_cqe* cqe = nullptr;
  unsigned head = 0;
  unsigned seen = 0;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    ++seen;
    if (auto* op = static_cast<Op*>(io_uring_cqe_get_data(cqe))) {
      done.emplace_back(std::unique_ptr<Op>(op), cqe->res);
      --in_flight_;
    }
  }
  io_uring_cq_advance(&ring_, seen);
  for (auto& [op, result] : done) complete(*op, result);
}

void IoRing::complete(Op& op, int result) {
  boost::asio::any_io_executor executor = std::move(op.handler_executor);
  boost::asio::post(executor, [h = std::move(op.handler), result]() mutable { std::move(h)(result); });
}

}  // namespace pensieve::rt
