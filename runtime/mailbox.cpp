#include "runtime/mailbox.hpp"

namespace pensieve::rt {

std::string_view to_string(SendStatus status) noexcept {
  switch (status) {
    case SendStatus::sent:
      return "sent";
    case SendStatus::full:
      return "full";
    case SendStatus::closed:
      return "closed";
    case SendStatus::cancelled:
      return "cancelled";
  }
  return "unknown";
}

}  // namespace pensieve::rt
