#include "runtime/reply.hpp"

#include <stdexcept>
#include <string>

namespace pensieve::rt {

std::string_view to_string(AskError error) noexcept {
  switch (error) {
    case AskError::timed_out:
      return "timed out";
    case AskError::cancelled:
      return "cancelled";
    case AskError::actor_stopped:
      return "actor stopped";
    case AskError::no_reply:
      return "no reply";
  }
  return "unknown";
}

void throw_exception_from_error(const AskError& error, const boost::source_location&) {
  throw std::runtime_error("ask failed: " + std::string(to_string(error)));
}

}  // namespace pensieve::rt
