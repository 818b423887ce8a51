#include "gpu/model/tp_rank_threads.hpp"

#include "runtime/thread_name.hpp"

#include <string>

namespace pensieve::model {

TpRankThreads::TpRankThreads(std::int32_t ranks) : ranks_(ranks) {
  for (std::int32_t r = 1; r < ranks; ++r)
    threads_.emplace_back([this, r] {
      rt::name_this_thread("pv-tp-" + std::to_string(r));
      loop(r);
    });
}

TpRankThreads::~TpRankThreads() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  threads_.clear();  // joins
}

void TpRankThreads::run(const std::function<void(std::int32_t rank)>& part) {
  if (ranks_ > 1) {
    {
      std::lock_guard lock(mutex_);
      part_ = &part;
      running_ = ranks_ - 1;
      ++step_;
    }
    start_.notify_all();
  }
  part(0);
  if (ranks_ > 1) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return running_ == 0; });
    part_ = nullptr;
  }
}

void TpRankThreads::loop(std::int32_t rank) {
  std::uint64_t seen = 0;
  for (;;) {
    const std::function<void(std::int32_t)>* part = nullptr;
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || step_ != seen; });
      if (stopping_) return;
      seen = step_;
      part = part_;
    }
    (*part)(rank);
    bool last = false;
    {
      std::lock_guard lock(mutex_);
      last = --running_ == 0;
    }
    if (last) done_.notify_one();
  }
}

}  // namespace pensieve::model
