// Percentiles and the run summary of pensieve-bench.
#include "bench/pensieve-bench/stats.hpp"

#include <catch2/catch.hpp>

using namespace pensieve::bench;

TEST_CASE("percentiles interpolate linearly between closest ranks", "[bench]") {
  const std::vector<double> v{4, 1, 3, 2, 5};  // sorted: 1 2 3 4 5
  CHECK(*percentile(v, 0) == 1.0);
  CHECK(*percentile(v, 50) == 3.0);
  CHECK(*percentile(v, 100) == 5.0);
  CHECK(*percentile(v, 25) == 2.0);
  CHECK(*percentile(v, 90) == Approx(4.6).epsilon(1e-12));  // rank 3.6
  CHECK(*percentile(v, 99) == Approx(4.96).epsilon(1e-12));
  CHECK(*percentile({7.0}, 99) == 7.0);
  CHECK_FALSE(percentile({}, 50).has_value());
  CHECK(*mean(v) == 3.0);
}

TEST_CASE("a run summary counts throughput, errors and goodput under the SLO", "[bench]") {
  std::vector<RequestRecord> records(4);
  // Good: TTFT 0.1 s, 11 tokens in 1.1 s -> 0.1 s per later token.
  records[0].ttft_s = 0.1;
  records[0].e2e_s = 1.1;
  records[0].completion_tokens = 11;
  records[0].prompt_tokens = 100;
  records[0].cached_tokens = 40;
  records[0].inter_token_s = {0.1, 0.1};
  // TTFT over the SLO.
  records[1].ttft_s = 3.0;
  records[1].e2e_s = 3.5;
  records[1].completion_tokens = 6;
  records[1].prompt_tokens = 50;
  // Time per later token over the SLO: (2.1 - 0.1) / 4 = 0.5 s.
  records[2].ttft_s = 0.1;
  records[2].e2e_s = 2.1;
  records[2].completion_tokens = 5;
  records[2].prompt_tokens = 10;
  records[3].error = "HTTP 503: overloaded";
  const RunSummary s = summarize(records, 2.0, Slo{2000.0, 200.0});
  CHECK(s.requests == 3);
  CHECK(s.errors == 1);
  CHECK(s.error_examples == std::vector<std::string>{"HTTP 503: overloaded"});
  CHECK(s.good_requests == 1);
  CHECK(s.completion_tokens == 22);
  CHECK(s.prompt_tokens == 160);
  CHECK(s.cached_tokens == 40);
  CHECK(s.requests_per_s == 1.5);
  CHECK(s.output_tokens_per_s == 11.0);
  CHECK(s.goodput_requests_per_s == 0.5);
  CHECK(s.ttft_s.count == 3);
  CHECK(*s.ttft_s.p50 == 0.1);
  CHECK(*s.inter_token_s.p50 == 0.1);
  // Normalized latency: 1.1/11, 3.5/6, 2.1/5.
  CHECK(*s.normalized_s_per_token.mean == Approx((0.1 + 3.5 / 6 + 0.42) / 3).epsilon(1e-12));
}
