#pragma once
// A device stream that records what is asked of it, in order, in a log
// shared by every stream of a test (and by a fake backend's compute side),
// so a test can check the order a CUDA run would see: which copies came
// before which event, what waits on what. Copies run at once (memcpy: the
// "device" memory of these tests is host memory); events are device-side
// only: they stay incomplete on the host until the test calls
// DeviceLog::complete_all(), as CUDA events stay pending while the host
// races ahead. A wait on an event the log never recorded fails the test.
// FakeGather stands for the CUDA backend's gather kernel: one launch on the
// stream it is given, logged as one line with its run count.
#include "gpu/backend/kv_tier_links.hpp"
#include "runtime/stream.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace pensieve::testing {

struct DeviceLog {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::set<int> recorded;
  std::vector<std::shared_ptr<rt::detail::EventState>> pending;
  int next_event = 0;

  void add(std::string line) {
    std::lock_guard lock(mutex);
    lines.push_back(std::move(line));
  }
  std::vector<std::string> snapshot() {
    std::lock_guard lock(mutex);
    return lines;
  }
  // The device catches up: every recorded event completes.
  void complete_all() {
    std::vector<std::shared_ptr<rt::detail::EventState>> done;
    {
      std::lock_guard lock(mutex);
      done.swap(pending);
    }
    for (auto& e : done) e->complete();
  }
  static int id_of(const rt::Event& e) {
    return e.device_event() == nullptr ? -1 : *static_cast<const int*>(e.device_event());
  }
  rt::Event record(const std::string& stream) {
    auto state = std::make_shared<rt::detail::EventState>();
    std::lock_guard lock(mutex);
    const int id = ++next_event;
    recorded.insert(id);
    pending.push_back(state);
    lines.push_back(stream + " record e" + std::to_string(id));
    return rt::Event(std::move(state), std::make_shared<int>(id));
  }
  // A wait by `who` (a stream or the fake backend's compute side).
  void wait(const std::string& who, const rt::Event& e) {
    const int id = id_of(e);
    std::lock_guard lock(mutex);
    CHECK(recorded.contains(id));  // every event is recorded before it is waited on
    lines.push_back(who + " wait e" + std::to_string(id));
  }
};

class FakeDeviceStream final : public rt::Stream {
 public:
  FakeDeviceStream(std::shared_ptr<DeviceLog> log, std::string name) : log_(std::move(log)), name_(std::move(name)) {}

  rt::StreamBackend backend() const noexcept override { return rt::StreamBackend::cuda; }
  std::string_view name() const noexcept override { return name_; }
  void enqueue(rt::HostFn fn, std::string_view /*op*/) override { fn(); }
  void copy(void* dst, const void* src, std::size_t bytes, std::string_view op) override {
    std::memcpy(dst, src, bytes);
    log_->add(name_ + " copy " + std::string(op) + " " + std::to_string(bytes));
  }
  rt::Event record() override { return log_->record(name_); }
  void wait(const rt::Event& event) override { log_->wait(name_, event); }

 private:
  std::shared_ptr<DeviceLog> log_;
  std::string name_;
};

// Copies at once, as FakeDeviceStream does; one log line per launch:
// "<stream> gather <op> <runs> runs <bytes>".
class FakeGather final : public backend::TierGather {
 public:
  explicit FakeGather(std::shared_ptr<DeviceLog> log) : log_(std::move(log)) {}
  void launch(rt::Stream& stream, backend::TierDirection direction, std::span<const backend::TierRun> runs,
              std::string_view op) override {
    std::size_t bytes = 0;
    for (const backend::TierRun& r : runs) {
      if (direction == backend::TierDirection::to_device) {
        std::memcpy(r.device, r.host, r.bytes);
      } else {
        std::memcpy(r.host, r.device, r.bytes);
      }
      bytes += r.bytes;
    }
    log_->add(std::string(stream.name()) + " gather " + std::string(op) + " " + std::to_string(runs.size()) +
              " runs " + std::to_string(bytes));
  }

 private:
  std::shared_ptr<DeviceLog> log_;
};

}  // namespace pensieve::testing
