#include "actors/disk_restore_rule.hpp"

namespace pensieve::actors {

const char* disk_restore_mode_name(DiskRestoreMode mode) {
  switch (mode) {
    case DiskRestoreMode::read: return "always";
    case DiskRestoreMode::recompute: return "never";
    case DiskRestoreMode::rule: break;
  }
  return "auto";
}

std::optional<DiskRestoreMode> disk_restore_mode_from_name(std::string_view name) {
  if (name == "auto") return DiskRestoreMode::rule;
  if (name == "always") return DiskRestoreMode::read;
  if (name == "never") return DiskRestoreMode::recompute;
  return std::nullopt;
}

void DiskReadMeter::observe(std::int64_t chunks, std::int64_t wall_ns) {
  if (chunks <= 0 || wall_ns <= 0) return;
  const double sample = double(wall_ns) * 1e-9 / double(chunks);
  seconds_per_chunk_ = seconds_per_chunk_ ? 0.75 * *seconds_per_chunk_ + 0.25 * sample : sample;
}

bool read_from_disk(DiskRestoreMode mode, const DiskReadMeter& meter, const CostModel& cost, bool cost_in_seconds,
                    std::int64_t begin_token, std::int64_t end_token) {
  switch (mode) {
    case DiskRestoreMode::read:
      return true;
    case DiskRestoreMode::recompute:
      return false;
    case DiskRestoreMode::rule:
      break;
  }
  const auto read_s = meter.seconds_per_chunk();
  if (!read_s || !cost_in_seconds) return true;
  return *read_s <= cost.range_cost(begin_token, end_token);
}

}  // namespace pensieve::actors
