#include "runtime/thread_priority.hpp"

#include <algorithm>
#include <cerrno>

#if defined(__linux__)
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace pensieve::rt {

namespace {

constexpr int kUnknown = -1000;  // below any nice value: not read yet
thread_local int cached_nice = kUnknown;

#if defined(__linux__)
id_t this_tid() {
  return static_cast<id_t>(::syscall(SYS_gettid));
}
#endif

}  // namespace

int this_thread_nice() {
  if (cached_nice != kUnknown) return cached_nice;
#if defined(__linux__)
  if (::sched_getscheduler(0) == SCHED_IDLE) {  // 0: the calling thread
    cached_nice = kIdleClass;
    return cached_nice;
  }
  errno = 0;
  const int n = ::getpriority(PRIO_PROCESS, this_tid());
  cached_nice = errno == 0 ? n : 0;
#else
  cached_nice = 0;
#endif
  return cached_nice;
}

int lower_this_thread_priority(int nice) {
  nice = std::clamp(nice, 0, kIdleClass);
  const int now = this_thread_nice();
  if (nice <= now) return now;
#if defined(__linux__)
  // May fail only under a seccomp or LSM policy; the thread then keeps its
  // priority, which costs latency, not correctness.
  if (::setpriority(PRIO_PROCESS, this_tid(), std::min(nice, kMaxNice)) == 0) cached_nice = std::min(nice, kMaxNice);
  if (nice == kIdleClass) {
    const sched_param none{};
    if (::sched_setscheduler(0, SCHED_IDLE, &none) == 0) cached_nice = kIdleClass;
  }
#endif
  return cached_nice;
}

}  // namespace pensieve::rt
