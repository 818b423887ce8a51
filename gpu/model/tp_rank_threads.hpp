#pragma once
// The persistent threads of a tensor-parallel forward pass: ranks 1..N-1
// each have a thread that lives as long as this object and runs that rank's
// part of every step; rank 0's part runs on the caller's thread. A step
// costs two condition-variable hand-offs per rank instead of a thread start.
//
// Owns the N-1 threads. run() is called from one thread at a time (the
// owner's); it returns once every rank's part has returned, so the parts
// may capture the caller's locals by reference.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pensieve::model {

class TpRankThreads {
 public:
  explicit TpRankThreads(std::int32_t ranks);
  ~TpRankThreads();
  TpRankThreads(const TpRankThreads&) = delete;
  TpRankThreads& operator=(const TpRankThreads&) = delete;

  std::int32_t ranks() const { return ranks_; }
  // Runs part(r) for every rank r at once (r = 0 on this thread).
  void run(const std::function<void(std::int32_t rank)>& part);

 private:
  void loop(std::int32_t rank);

  std::int32_t ranks_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(std::int32_t)>* part_ = nullptr;  // this step's, under mutex_
  std::uint64_t step_ = 0;     // bumped to start a step
  std::int32_t running_ = 0;   // ranks 1..N-1 still in this step
  bool stopping_ = false;
  std::vector<std::jthread> threads_;  // last: joined before the state above goes
};

}  // namespace pensieve::model
