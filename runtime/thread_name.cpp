#include "runtime/thread_name.hpp"

#include <cassert>
#include <string>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace pensieve::rt {

void name_this_thread(std::string_view name) {
#if defined(__linux__)
  const std::string cut(name.substr(0, 15));
  // Fails only for a name over 15 bytes or another process's thread: neither here.
  [[maybe_unused]] const int rc = pthread_setname_np(pthread_self(), cut.c_str());
  assert(rc == 0);
#else
  (void)name;
#endif
}

}  // namespace pensieve::rt
