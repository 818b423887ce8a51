#pragma once
// The machine's memory read bandwidth, measured in-process: every thread
// streams its share of a buffer much larger than the last-level cache and
// sums it, so the figure is what a memory-bound decode step can hope for.
//
// A ReadBandwidthProbe owns its buffer (allocated and first touched once, by
// the threads that later read it) and is used from one thread; measure()
// starts and joins its own reader threads.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include <immintrin.h>
#include <sys/mman.h>

namespace pensieve::bench {

struct BandwidthResult {
  double best_gb_per_s = 0.0;    // 1e9 bytes per second, the fastest pass
  double median_gb_per_s = 0.0;
  std::size_t buffer_bytes = 0;
  int threads = 0;
  int passes = 0;
};

class ReadBandwidthProbe {
 public:
  ReadBandwidthProbe(std::size_t buffer_bytes, int n_threads)
      : bytes_(buffer_bytes / (64 * static_cast<std::size_t>(n_threads)) * 64 *
               static_cast<std::size_t>(n_threads)),
        threads_(n_threads) {
    constexpr std::size_t huge_page = 2u << 20;
    const std::size_t alloc = (bytes_ + huge_page - 1) / huge_page * huge_page;
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(huge_page, alloc)));
    if (!data_) throw std::bad_alloc();
    madvise(data_.get(), alloc, MADV_HUGEPAGE);  // fewer TLB misses; advice only
    run_threads([this](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; i += 64)
        std::fill_n(data_.get() + i, 64, static_cast<std::byte>(i >> 6));
    });
  }

  // Reads the whole buffer `passes` times (after one warm-up pass).
  BandwidthResult measure(int passes) {
    std::vector<double> gbs;
    for (int p = 0; p <= passes; ++p) {
      const double seconds = timed_read();
      if (p > 0) gbs.push_back(static_cast<double>(bytes_) / seconds / 1e9);
    }
    std::sort(gbs.begin(), gbs.end());
    return {gbs.back(), gbs[gbs.size() / 2], bytes_, threads_, passes};
  }

  // Keeps the sums observable so the compiler cannot drop the reads.
  double checksum() const { return checksum_; }

 private:
  struct FreeDeleter {
    void operator()(std::byte* p) const { std::free(p); }
  };

  template <class Body>
  void run_threads(Body body) {
    std::vector<std::thread> workers;
    const std::size_t share = bytes_ / static_cast<std::size_t>(threads_);
    for (int t = 0; t < threads_; ++t) {
      const std::size_t begin = share * static_cast<std::size_t>(t);
      workers.emplace_back([=] { body(begin, begin + share); });
    }
    for (auto& w : workers) w.join();
  }

  double timed_read() {
    std::barrier sync(threads_ + 1);
    std::vector<double> sums(static_cast<std::size_t>(threads_), 0.0);
    std::vector<std::thread> workers;
    const std::size_t share = bytes_ / static_cast<std::size_t>(threads_);
    for (int t = 0; t < threads_; ++t) {
      workers.emplace_back([&, t] {
        const std::size_t begin = share * static_cast<std::size_t>(t);
        sync.arrive_and_wait();
        sums[static_cast<std::size_t>(t)] = read_sum(data_.get() + begin, share);
        sync.arrive_and_wait();
      });
    }
    sync.arrive_and_wait();
    const auto start = std::chrono::steady_clock::now();
    sync.arrive_and_wait();
    const auto stop = std::chrono::steady_clock::now();
    for (auto& w : workers) w.join();
    for (double s : sums) checksum_ += s;
    return std::chrono::duration<double>(stop - start).count();
  }

  // Four independent accumulators keep enough loads in flight to saturate
  // the memory system rather than the add latency.
  static double read_sum(const std::byte* p, std::size_t n) {
#if defined(__AVX512F__)
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    std::size_t i = 0;
    for (; i + 256 <= n; i += 256) {
      a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
      a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
      a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
      a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
    }
    const __m512i sum = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
    auto total = static_cast<std::uint64_t>(_mm512_reduce_add_epi64(sum));
#else
    std::uint64_t total = 0;
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      std::uint64_t v;
      std::memcpy(&v, p + i, 8);
      total += v;
    }
#endif
    for (; i < n; ++i) total += static_cast<std::uint64_t>(p[i]);
    return static_cast<double>(total);
  }

  std::size_t bytes_;
  int threads_;
  std::unique_ptr<std::byte, FreeDeleter> data_;
  double checksum_ = 0.0;
};

}  // namespace pensieve::bench
