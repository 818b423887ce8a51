#pragma once
// LayerGates: the per-layer swap-in events one forward pass must respect on a
// backend that waits on the device (CUDA: cudaStreamWaitEvent on the compute
// stream, so the host never blocks). Layer l's KV write and attention read
// blocks that the copy-in stream may still be filling, so the pass makes its
// stream wait for ready[l] just before layer l, and never earlier: layer l's
// copy overlaps layer l-1's compute. Each event is waited on once; a
// complete one is skipped. Armed for one pass, then empty again.
//
// Plain C++ so that the order is tested on the CPU (tests/gpu/
// layer_gates_test.cpp, and the swap pipeline's fake-stream test).
#include "runtime/event.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace pensieve::backend {

class LayerGates {
 public:
  void arm(std::vector<rt::Event> ready) { ready_ = std::move(ready); }
  bool armed() const { return !ready_.empty(); }
  void clear() { ready_.clear(); }

  // Calls wait(event) for layer l's event if it has one that is not
  // complete; returns how many waits it issued (0 or 1).
  template <class Wait>
  int before_layer(std::int32_t layer, Wait&& wait) {
    if (layer < 0 || std::size_t(layer) >= ready_.size()) return 0;
    rt::Event& e = ready_[std::size_t(layer)];
    if (e.is_complete()) return 0;
    wait(e);
    e = rt::Event{};  // once
    return 1;
  }

 private:
  std::vector<rt::Event> ready_;
};

}  // namespace pensieve::backend
