#include "runtime/actor.hpp"

#include <array>

namespace pensieve::rt {

std::string_view variant_alternative_name(std::size_t index) noexcept {
  // Span names must outlive the tracer's drain: literals, not formatted strings.
  static constexpr std::array<std::string_view, 32> names = {
      "msg#0",  "msg#1",  "msg#2",  "msg#3",  "msg#4",  "msg#5",  "msg#6",  "msg#7",
      "msg#8",  "msg#9",  "msg#10", "msg#11", "msg#12", "msg#13", "msg#14", "msg#15",
      "msg#16", "msg#17", "msg#18", "msg#19", "msg#20", "msg#21", "msg#22", "msg#23",
      "msg#24", "msg#25", "msg#26", "msg#27", "msg#28", "msg#29", "msg#30", "msg#31"};
  return index < names.size() ? names[index] : std::string_view("msg#32+");
}

}  // namespace pensieve::rt
