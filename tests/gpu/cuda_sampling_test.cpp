// Device sampling against a host reference of the same rule (temperature,
// top-k, top-p over the remaining mass, inverse CDF in vocabulary order), in
// F64, on random logits over a large vocabulary.
#ifdef PENSIEVE_HAVE_CUDA
#include "gpu/kernels/cuda/sampling_launch.hpp"
#include "tests/gpu/cuda_test_support.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

using namespace pensieve;
namespace kcu = pensieve::kernels::cuda;
using testing::cuda_require;
using testing::DeviceCopy;

namespace {

std::int32_t reference_sample(const float* row, std::int32_t vocab, const kcu::DeviceSamplingParams& p) {
  std::vector<std::int32_t> order(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return row[a] > row[b]; });
  if (p.temperature < kcu::kGreedyBelowTemperature || p.top_k == 1) return order[0];
  std::size_t keep = p.top_k > 0 ? std::min<std::size_t>(std::size_t(p.top_k), order.size()) : order.size();
  std::vector<double> w(keep);
  double mass = 0;
  for (std::size_t i = 0; i < keep; ++i) mass += w[i] = std::exp(double(row[order[i]] - row[order[0]]) / p.temperature);
  if (p.top_p < 1.0f) {
    double head = 0;
    std::size_t n = 0;
    while (n < keep && head < double(p.top_p) * mass) head += w[n++];
    keep = n;
    mass = head;
  }
  std::vector<bool> candidate(std::size_t(vocab), false);
  for (std::size_t i = 0; i < keep; ++i) candidate[std::size_t(order[i])] = true;
  const double target = double(p.uniform) * mass;
  double acc = 0;
  std::int32_t last = -1;
  for (std::int32_t i = 0; i < vocab; ++i) {
    if (!candidate[std::size_t(i)]) continue;
    acc += std::exp(double(row[i] - row[order[0]]) / p.temperature);
    last = i;
    if (target < acc) return i;
  }
  return last;
}

}  // namespace

TEST_CASE("device sampling draws the host reference's token for greedy, top-k and top-p rows",
          "[gpu][cuda_sampling]") {
  testing::require_cuda_device();
  std::mt19937_64 rng(21);
  const std::int32_t vocab = 128256, rows = 48;
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> logits(std::size_t(rows) * std::size_t(vocab));
  for (auto& x : logits) x = normal(rng);
  // Row 0: a planted tie at the maximum: greedy takes the first index.
  logits[100] = logits[5000] = 40.0f;
  std::vector<kcu::DeviceSamplingParams> params(rows);
  const float temps[] = {0.0f, 1.0f, 0.7f, 1.3f};
  const std::int32_t ks[] = {0, 1, 5, 50, 1000};
  const float ps[] = {1.0f, 0.9f, 0.5f, 0.05f};
  for (std::int32_t r = 0; r < rows; ++r) {
    auto& p = params[std::size_t(r)];
    p.temperature = temps[r % 4];
    p.top_k = ks[(r / 4) % 5];
    p.top_p = ps[(r / 3) % 4];
    p.uniform = unit(rng);
  }
  params[0].temperature = 0.0f;
  DeviceCopy d_logits(logits), d_params(params), d_tokens(std::size_t(rows) * 4);
  cuda_require(kcu::launch_sample(d_logits.as<float>(), vocab, rows, vocab, d_params.as<kcu::DeviceSamplingParams>(),
                                  d_tokens.as<std::int32_t>(), nullptr));
  const auto tokens = d_tokens.read<std::int32_t>(std::size_t(rows));
  CHECK(tokens[0] == 100);
  int agree = 0;
  for (std::int32_t r = 0; r < rows; ++r) {
    const auto want = reference_sample(&logits[std::size_t(r) * std::size_t(vocab)], vocab, params[std::size_t(r)]);
    INFO("row " << r << " T " << params[std::size_t(r)].temperature << " k " << params[std::size_t(r)].top_k
                << " p " << params[std::size_t(r)].top_p << " u " << params[std::size_t(r)].uniform);
    CHECK(tokens[std::size_t(r)] == want);
    agree += tokens[std::size_t(r)] == want;
  }
  testing::report_metric("sampling.rows_matching_reference", agree);
}

TEST_CASE("top-k 5 draws only the five largest logits, and every one of them over many draws",
          "[gpu][cuda_sampling]") {
  testing::require_cuda_device();
  std::mt19937_64 rng(22);
  const std::int32_t vocab = 32000, rows = 256;
  std::vector<float> row(static_cast<std::size_t>(vocab));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& x : row) x = normal(rng);
  std::vector<std::int32_t> order(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 5, order.end(), [&](auto a, auto b) { return row[a] > row[b]; });
  const std::set<std::int32_t> top5(order.begin(), order.begin() + 5);
  std::vector<float> logits;
  std::vector<kcu::DeviceSamplingParams> params;
  for (std::int32_t r = 0; r < rows; ++r) {
    logits.insert(logits.end(), row.begin(), row.end());
    params.push_back({2.0f, 5, 1.0f, (float(r) + 0.5f) / float(rows)});
  }
  DeviceCopy d_logits(logits), d_params(params), d_tokens(std::size_t(rows) * 4);
  cuda_require(kcu::launch_sample(d_logits.as<float>(), vocab, rows, vocab, d_params.as<kcu::DeviceSamplingParams>(),
                                  d_tokens.as<std::int32_t>(), nullptr));
  const auto tokens = d_tokens.read<std::int32_t>(std::size_t(rows));
  const std::set<std::int32_t> seen(tokens.begin(), tokens.end());
  CHECK(seen == top5);
}
#endif  // PENSIEVE_HAVE_CUDA
