#include "tools/pensieve/options.hpp"

#include <catch2/catch.hpp>

using pensieve::actors::EvictionPolicyKind;
using pensieve::server::parse_options;

TEST_CASE("the KV tier flags parse: policy, watermark, decode reserve, gathering", "[tools][tiers]") {
  auto defaults = parse_options({});
  REQUIRE(defaults.has_value());
  CHECK(defaults->kv_cache.eviction_policy == EvictionPolicyKind::cost_aware);
  CHECK(defaults->kv_cache.swap_out_watermark == 0.25);
  CHECK(defaults->scheduler.decode_reserve == 0.10);
  CHECK(defaults->gather_copies);
  CHECK(defaults->swap_gather_kernel);  // the CUDA swap engine's gather kernel for scattered runs
  CHECK(defaults->kv_host_mb == -1);  // automatic: the engine's default host tier
  CHECK(defaults->cost_model == "measure");  // timed prefills at start-up
  auto profile = parse_options({"--cost-model", "cost.txt"});
  REQUIRE(profile.has_value());
  CHECK(profile->cost_model == "cost.txt");
  auto o = parse_options({"--eviction-policy", "lru", "--swap-out-watermark=0.5", "--decode-reserve", "0",
                          "--no-gather", "--kv-host-mb", "64", "--swap-gather", "off"});
  REQUIRE(o.has_value());
  CHECK(o->kv_cache.eviction_policy == EvictionPolicyKind::lru);
  CHECK(o->kv_cache.swap_out_watermark == 0.5);
  CHECK(o->scheduler.decode_reserve == 0.0);
  CHECK_FALSE(o->gather_copies);
  CHECK_FALSE(o->swap_gather_kernel);
  CHECK(o->kv_host_mb == 64);
}

TEST_CASE("a bad KV tier flag is a one-line reason", "[tools][tiers]") {
  auto message = [](std::vector<std::string> args) {
    auto o = parse_options(args);
    REQUIRE_FALSE(o.has_value());
    return o.error().message;
  };
  CHECK(message({"--eviction-policy", "fifo"}) == "--eviction-policy: 'fifo' is not lru or cost");
  CHECK(message({"--cost-model", ""}) == "--cost-model: measure, default or a profile file");
  CHECK(message({"--swap-out-watermark", "1.5"}) == "--swap-out-watermark: '1.5' is not a number in [0, 1]");
  CHECK(message({"--swap-gather", "on"}) == "--swap-gather: 'on' is not auto or off");
  CHECK(message({"--decode-reserve", "x"}) == "--decode-reserve: 'x' is not a number in [0, 1]");
}

TEST_CASE("the flags --kv-disk-restore and --kv-flush-on-exit-s parse, and bad values are a one-line reason",
          "[tools][tiers]") {
  using pensieve::actors::DiskRestoreMode;
  auto defaults = parse_options({});
  REQUIRE(defaults.has_value());
  CHECK(defaults->kv_cache.disk_restore == DiskRestoreMode::rule);
  CHECK(defaults->kv_flush_on_exit_s == 5);
  auto mode = [](const std::string& v) {
    auto o = parse_options({"--kv-disk-restore", v});
    REQUIRE(o.has_value());
    return o->kv_cache.disk_restore;
  };
  CHECK(mode("auto") == DiskRestoreMode::rule);
  CHECK(mode("always") == DiskRestoreMode::read);
  CHECK(mode("never") == DiskRestoreMode::recompute);
  auto off = parse_options({"--kv-flush-on-exit-s=0"});
  REQUIRE(off.has_value());
  CHECK(off->kv_flush_on_exit_s == 0);
  auto message = [](std::vector<std::string> args) {
    auto o = parse_options(args);
    REQUIRE_FALSE(o.has_value());
    return o.error().message;
  };
  CHECK(message({"--kv-disk-restore", "sometimes"}) == "--kv-disk-restore: 'sometimes' is not auto, always or never");
  CHECK(message({"--kv-flush-on-exit-s", "-1"}) == "--kv-flush-on-exit-s: -1 is out of range [0, 3600]");
  CHECK(message({"--kv-flush-on-exit-s", "soon"}) == "--kv-flush-on-exit-s: 'soon' is not an integer");
  const std::string help = pensieve::server::usage();
  CHECK(help.find("--kv-disk-restore M") != std::string::npos);
  CHECK(help.find("--kv-flush-on-exit-s N") != std::string::npos);
}
