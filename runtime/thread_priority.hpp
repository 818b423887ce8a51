#pragma once
// Per-thread CPU priority for compute threads. On a machine whose cores the
// forward pass keeps busy, the threads that deliver tokens (HTTP I/O, the
// scheduler) wait for a CFS slice behind it; a higher nice value on the
// compute threads lets delivery preempt compute instead. Lowering a thread's
// priority needs no privilege; raising it back does, so these functions only
// ever lower it.
//
// Linux keeps the nice value per thread (setpriority(PRIO_PROCESS, tid)), and
// a new thread inherits its creator's: lower only threads that create no
// non-compute threads afterwards. Elsewhere the functions do nothing.
//
// Free functions on the calling thread; each thread caches its own value
// (thread_local), so the check costs a load once the value is applied.

namespace pensieve::rt {

// The nice values setpriority accepts for lowering: 0 (unchanged) .. 19.
inline constexpr int kMaxNice = 19;
// One step past nice 19: the SCHED_IDLE class, which runs only while no
// other thread wants the core, so any woken delivery thread preempts it at
// once (a nice-19 thread may still finish its slice first). For a machine
// that serves only this process: anything else running starves the pass.
inline constexpr int kIdleClass = kMaxNice + 1;

// The calling thread's nice value (read from the kernel once per thread,
// then the cached value, which lower_this_thread_priority keeps current).
int this_thread_nice();

// Raises the calling thread's nice value to `nice` (clamped to 0..20, 20 =
// kIdleClass) unless it is already at least that. Returns the thread's
// value afterwards (unchanged if the kernel refused).
int lower_this_thread_priority(int nice);

}  // namespace pensieve::rt
