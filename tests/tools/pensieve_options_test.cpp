#include "tools/pensieve/default_model.hpp"
#include "tools/pensieve/options.hpp"

#include "gpu/model/model_loader.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

using pensieve::server::parse_options;

TEST_CASE("the server's flags parse into options, in both spellings", "[tools]") {
  auto o = parse_options({"--model", "m.gguf", "--port=9000", "--no-state", "--kv-disk-dir", "/tmp/kv",
                          "--kv-disk-gb", "3", "--threads", "2", "--api-key", "k", "--history-dir", "/tmp/h"});
  REQUIRE(o.has_value());
  CHECK(o->model == "m.gguf");
  CHECK(o->port == 9000);
  CHECK_FALSE(o->scheduler.keep_kv);
  CHECK(o->kv_disk_gb == 3);
  CHECK(o->threads == 2);
  CHECK(o->api_key == "k");
  CHECK(o->host == "127.0.0.1");
  CHECK(o->history_dir == "/tmp/h");
}

TEST_CASE("a bad flag or value is a one-line reason", "[tools]") {
  auto message = [](std::vector<std::string> args) {
    auto o = parse_options(args);
    REQUIRE_FALSE(o.has_value());
    CHECK(o.error().message.find('\n') == std::string::npos);
    return o.error().message;
  };
  CHECK(message({"--bogus"}) == "unknown option '--bogus' (see --help)");
  CHECK(message({"--port", "70000"}).find("out of range") != std::string::npos);
  CHECK(message({"--port", "80x"}).find("not an integer") != std::string::npos);
  CHECK(message({"--model"}) == "--model needs a value");
  CHECK(message({"--api-key", "a", "--api-keys", "f"}).find("exclusive") != std::string::npos);
  CHECK(message({"--kv-disk-gb", "2"}).find("--kv-disk-dir") != std::string::npos);
  CHECK(message({"--kv-dtype", "q4_0"}) == "--kv-dtype: 'q4_0' is not f32, f16, bf16, q8_0 or fp8");
}

TEST_CASE("pensieve --max-prefill-tokens is 128 on the CPU backend and the whole batch on cuda unless given", "[tools]") {
  auto chunk = [](std::vector<std::string> args) {
    auto o = parse_options(args);
    REQUIRE(o.has_value());
    return o->scheduler.max_prefill_tokens;
  };
  CHECK(chunk({}) == 128);
  CHECK(chunk({"--backend", "cuda"}) == 0);
  CHECK(chunk({"--max-prefill-tokens", "64"}) == 64);
  CHECK(chunk({"--backend", "cuda", "--max-prefill-tokens=256"}) == 256);
  CHECK(chunk({"--max-prefill-tokens", "0"}) == 0);
}

TEST_CASE("the server's --kv-dtype is f16 by default and takes f32, f16, bf16, q8_0 and fp8", "[tools]") {
  using pensieve::kv::KvDType;
  auto dtype = [](std::vector<std::string> args) {
    auto o = parse_options(args);
    REQUIRE(o.has_value());
    return o->kv_dtype;
  };
  CHECK(dtype({}) == KvDType::f16);
  CHECK(dtype({"--kv-dtype", "f32"}) == KvDType::f32);
  CHECK(dtype({"--kv-dtype=bf16"}) == KvDType::bf16);
  CHECK(dtype({"--kv-dtype", "f16"}) == KvDType::f16);
  CHECK(dtype({"--kv-dtype", "q8_0"}) == KvDType::q8_0);
  CHECK(dtype({"--kv-dtype", "fp8"}) == KvDType::fp8);
}

TEST_CASE("the server's --help documents every flag", "[tools]") {
  const std::string text = pensieve::server::usage();
  for (const char* flag : {"--model", "--host", "--port", "--rpc-port", "--no-state", "--api-key",
                           "--api-keys", "--kv-device-mb", "--kv-host-mb", "--kv-disk-dir",
                           "--kv-disk-gb", "--kv-dtype", "--max-batch-tokens", "--max-prefill-tokens", "--threads", "--trace", "--history-dir"}) {
    CHECK(text.find(flag) != std::string::npos);
  }
}

TEST_CASE("the built-in default model is generated once and loads with a tokenizer", "[tools]") {
  const auto dir = std::filesystem::temp_directory_path() / ("pensieve-default-" + std::to_string(::getpid()));
  auto path = pensieve::server::ensure_default_model(dir);
  REQUIRE(path.has_value());
  const auto written = std::filesystem::last_write_time(*path);
  auto again = pensieve::server::ensure_default_model(dir);
  REQUIRE(again.has_value());
  CHECK(*again == *path);
  CHECK(std::filesystem::last_write_time(*again) == written);
  auto weights = pensieve::model::load_model(*path);
  REQUIRE(weights.has_value());
  CHECK(weights->config.n_layers == 4);
  CHECK(weights->config.dim == 256);
  REQUIRE(weights->tokenizer.has_value());
  CHECK(weights->tokenizer->chat_template.find("<|im_start|>") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the server's --context-overflow and --history-reset-on-model-change parse, and a bad policy is named", "[tools]") {
  auto defaults = parse_options({});
  REQUIRE(defaults.has_value());
  CHECK(defaults->context_overflow == pensieve::actors::ContextOverflow::truncate);
  CHECK_FALSE(defaults->history_reset_on_model_change);
  auto o = parse_options({"--context-overflow", "error", "--history-reset-on-model-change"});
  REQUIRE(o.has_value());
  CHECK(o->context_overflow == pensieve::actors::ContextOverflow::error);
  CHECK(o->history_reset_on_model_change);
  auto bad = parse_options({"--context-overflow=drop"});
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message == "--context-overflow: 'drop' is not truncate or error");
}

TEST_CASE("the server's --max-conversations and --conversation-idle-s parse, default off, and are documented",
          "[tools]") {
  auto defaults = parse_options({});
  REQUIRE(defaults.has_value());
  CHECK(defaults->max_conversations == 0);
  CHECK(defaults->conversation_idle_s == 0);
  auto o = parse_options({"--max-conversations", "5000", "--conversation-idle-s=600"});
  REQUIRE(o.has_value());
  CHECK(o->max_conversations == 5000);
  CHECK(o->conversation_idle_s == 600);
  auto zero = parse_options({"--max-conversations", "0"});
  REQUIRE_FALSE(zero.has_value());
  CHECK(zero.error().message.find("out of range") != std::string::npos);
  const std::string text = pensieve::server::usage();
  CHECK(text.find("--max-conversations N") != std::string::npos);
  CHECK(text.find("--conversation-idle-s S") != std::string::npos);
}
