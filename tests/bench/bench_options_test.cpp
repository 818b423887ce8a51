// The command line of pensieve-bench.
#include "bench/pensieve-bench/options.hpp"
#include "bench/pensieve-bench/report.hpp"

#include <catch2/catch.hpp>

using namespace pensieve::bench;

TEST_CASE("the bench's flags parse into options", "[bench]") {
  auto o = parse_bench_options({"--target", "http://127.0.0.1:8080", "--target", "vllm=http://gpu:8000/v1/",
                                "--data", "d.jsonl", "--conversations", "50", "--rate", "0.5,1,2",
                                "--think-time-s", "5", "--max-tokens=64", "--stateful", "--seed", "9",
                                "--duration-s", "30", "--slo-ttft-ms", "500", "--slo-tpot-ms", "50", "--out", "res"});
  REQUIRE(o.has_value());
  REQUIRE(o->targets.size() == 2);
  CHECK(o->targets[0].label == "127.0.0.1-8080");
  CHECK(o->targets[0].chat_path() == "/v1/chat/completions");
  CHECK(o->targets[1].label == "vllm");
  CHECK(o->targets[1].host == "gpu");
  CHECK(o->targets[1].port == 8000);
  CHECK(o->targets[1].chat_path() == "/v1/chat/completions");
  CHECK(o->rates == std::vector<double>{0.5, 1.0, 2.0});
  CHECK(o->concurrency.empty());
  CHECK(o->conversations == 50);
  CHECK(o->think_time_s == 5.0);
  CHECK(o->max_tokens == 64);
  CHECK(o->mode == ClientMode::stateful);
  CHECK(o->seed == 9);
  CHECK(o->duration_s == 30.0);
  CHECK(o->slo.ttft_ms == 500.0);
  CHECK(o->slo.tpot_ms == 50.0);
  CHECK(o->out_dir == "res");
  CHECK(o->command_line.rfind("pensieve-bench --target http://127.0.0.1:8080", 0) == 0);
  CHECK(run_file_name(o->targets[1].label, {0.5, std::nullopt}) == "vllm-rate0.5.json");
  CHECK(run_file_name("x", {std::nullopt, 4}) == "x-concurrency4.json");
}

TEST_CASE("without a load flag the bench keeps 4 conversations in flight", "[bench]") {
  auto o = parse_bench_options({"--target", "http://h", "--data", "d", "--out", "o"});
  REQUIRE(o.has_value());
  CHECK(o->concurrency == std::vector<std::size_t>{4});
  CHECK(o->targets[0].port == 80);
  CHECK(o->mode == ClientMode::stateless);
}

TEST_CASE("a bad bench flag is a one-line reason", "[bench]") {
  auto message = [](std::vector<std::string> args) {
    auto o = parse_bench_options(args);
    REQUIRE_FALSE(o.has_value());
    CHECK(o.error().message.find('\n') == std::string::npos);
    return o.error().message;
  };
  const std::vector<std::string> base{"--target", "http://h:1", "--data", "d", "--out", "o"};
  auto with = [&](std::vector<std::string> extra) {
    auto a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  CHECK(message(with({"--bogus"})) == "unknown option '--bogus' (see --help)");
  CHECK(message(with({"--rate", "1", "--concurrency", "2"})) == "--concurrency and --rate are exclusive");
  CHECK(message(with({"--rate", "1,x"})) == "--rate: 'x' is not a number");
  CHECK(message(with({"--rate", "0"})) == "--rate: 0 must be greater than 0");
  CHECK(message(with({"--stateful", "--stateless"})) == "--stateful and --stateless are exclusive");
  CHECK(message(with({"--target", "http://h:1"})).find("--target LABEL=URL") != std::string::npos);
  CHECK(message({"--target", "https://h", "--data", "d", "--out", "o"}).find("only http://") != std::string::npos);
  CHECK(message({"--target", "http://h:99999", "--data", "d", "--out", "o"}).find("bad port") != std::string::npos);
  CHECK(message({"--data", "d", "--out", "o"}) == "--target is required (see --help)");
  CHECK(message({"--target", "http://h", "--out", "o"}) == "--data is required (see --help)");
  CHECK(message(with({"--max-tokens"})) == "--max-tokens needs a value");
}

TEST_CASE("a target may name its own client mode, so one run compares the conversation API with a stateless client",
          "[bench]") {
  auto o = parse_bench_options({"--target", "stateful:conv=http://127.0.0.1:8080", "--target",
                                "stateless:openai=http://127.0.0.1:8081", "--target", "plain=http://127.0.0.1:8082",
                                "--stateful", "--data", "d", "--out", "o"});
  REQUIRE(o.has_value());
  REQUIRE(o->targets.size() == 3);
  CHECK(o->targets[0].label == "conv");
  CHECK(o->targets[0].mode == ClientMode::stateful);
  CHECK(o->targets[0].port == 8080);
  CHECK(o->targets[1].label == "openai");
  CHECK(o->targets[1].mode == ClientMode::stateless);
  CHECK(o->targets[1].url == "http://127.0.0.1:8081");
  CHECK_FALSE(o->targets[2].mode.has_value());  // the run's --stateful
  auto unlabelled = parse_target("stateless:http://h:9");
  REQUIRE(unlabelled.has_value());
  CHECK(unlabelled->mode == ClientMode::stateless);
  CHECK(unlabelled->label == "h-9");
  CHECK_FALSE(parse_target("statefull:http://h:9").has_value());
}

TEST_CASE("pensieve-bench --concurrency takes a list of client counts, swept in order", "[bench]") {
  auto o = parse_bench_options({"--target", "http://h", "--data", "d", "--out", "o", "--concurrency", "1,4,8,16"});
  REQUIRE(o.has_value());
  CHECK(o->concurrency == std::vector<std::size_t>{1, 4, 8, 16});
  auto bad = parse_bench_options({"--target", "http://h", "--data", "d", "--out", "o", "--concurrency", "1,x"});
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message == "--concurrency: 'x' is not an integer");
  CHECK_FALSE(parse_bench_options({"--target", "http://h", "--data", "d", "--out", "o", "--concurrency", "4,0"}).has_value());
}
