#pragma once
// Names the calling thread as `top -H`, `perf` and /proc/<pid>/task/*/comm
// show it: the server's threads by role (pv-control, pv-worker, pv-compute-N,
// pv-stream, pv-tp-N, pv-http-N, pv-rpc), so a run can be read per role
// (bench/clients-scaling.sh sums each role's CPU time). Linux keeps 15
// bytes; a longer name is cut there.
#include <string_view>

namespace pensieve::rt {

void name_this_thread(std::string_view name);

}  // namespace pensieve::rt
