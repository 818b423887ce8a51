// /metrics on the disk KV tier: what the start-up scan found and the
// prefix index took, and what the restore rule chose, as Prometheus lines;
// none of it without a disk tier.
#include "net/metrics.hpp"

#include <catch2/catch.hpp>

using pensieve::net::EngineGauges;
using pensieve::net::ServerMetrics;

TEST_CASE("/metrics reports the disk tier's start-up scan and its restore choices", "[metrics][disk]") {
  ServerMetrics metrics;
  EngineGauges g;
  CHECK(metrics.render(g).find("pensieve_kv_disk_") == std::string::npos);  // no disk tier
  g.disk_restore_mode = "auto";
  g.disk_scan_slots = 9;
  g.disk_scan_labelled = 5;
  g.disk_scan_empty = 2;
  g.disk_scan_corrupt = 1;
  g.disk_scan_foreign = 1;
  g.disk_found_paths = 2;
  g.disk_found_chunks = 4;
  g.disk_found_discarded = 1;
  g.disk_found_front_missing = 1;
  g.disk_restores_read = 3;
  g.disk_restores_recomputed = 1;
  g.disk_read_seconds_per_chunk = 0.0025;
  const std::string text = metrics.render(g);
  for (const char* line : {"pensieve_kv_disk_scan_slots{result=\"chunk\"} 5\n",
                           "pensieve_kv_disk_scan_slots{result=\"empty\"} 2\n",
                           "pensieve_kv_disk_scan_slots{result=\"corrupt\"} 1\n",
                           "pensieve_kv_disk_scan_slots{result=\"foreign\"} 1\n",
                           "pensieve_kv_disk_scan_slots{result=\"unreadable\"} 0\n",
                           "pensieve_kv_disk_found_chunks{state=\"registered\"} 4\n",
                           "pensieve_kv_disk_found_chunks{state=\"discarded\"} 1\n",
                           "pensieve_kv_disk_found_paths 2\n",
                           "pensieve_kv_disk_found_front_missing_paths 1\n",
                           "pensieve_kv_disk_restores_total{choice=\"read\"} 3\n",
                           "pensieve_kv_disk_restores_total{choice=\"recompute\"} 1\n",
                           "pensieve_kv_disk_read_seconds_per_chunk 0.0025\n",
                           "pensieve_kv_disk_restore_mode{mode=\"auto\"} 1\n",
                           "# TYPE pensieve_kv_disk_restores_total counter\n"}) {
    INFO(line);
    CHECK(text.find(line) != std::string::npos);
  }
}
