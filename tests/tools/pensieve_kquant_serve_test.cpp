// `pensieve --model` on the quantised kq-* GGUF files (Q4_K_M, Q6_K, Q8_0
// and Q4_0 mixes from llama-quantize): the real server loads each and
// answers a greedy completion over HTTP.
#include "tests/net/http_client.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tools/pensieve_child.hpp"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <string>

TEST_CASE("pensieve --model serves each kq-* quantised GGUF over HTTP", "[tools][kquant]") {
  const auto binary = pensieve::testing::pensieve_binary();
  for (const char* name : {"kq-q4_k_m", "kq-q6_k", "kq-q8_0", "kq-q4_0"}) {
    INFO(name);
    const auto model = pensieve::testing::shared_file(std::string("models/") + name + ".gguf");
    pensieve::testing::TempDir dir("pensieve-kquant-serve");
    pensieve::testing::PensieveChild server(binary, dir.path(),
                                            {"--model", model.string(), "--port", "0", "--rpc-port",
                                             "0", "--threads", "1", "--kv-device-mb", "64"});
    const auto port = server.http_port();
    // Line 5 of the golden files (BOS + 5 SentencePiece tokens); every kq
    // file keeps the base model's general.name, kq-base-f16.
    const auto reply = pensieve::testing::http_call(
        port, boost::beast::http::verb::post, "/v1/completions",
        R"({"model":"kq-base-f16","prompt":"The capital of France is","max_tokens":3,"temperature":0})");
    INFO(reply.body);
    REQUIRE(reply.status == 200);
    const auto usage = boost::json::parse(reply.body).as_object().at("usage").as_object();
    CHECK(usage.at("completion_tokens").to_number<int>() == 3);
    CHECK(usage.at("prompt_tokens").to_number<int>() == 6);
  }
}
