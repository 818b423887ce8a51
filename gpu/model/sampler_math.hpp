#pragma once
// The sampler's passes over a whole vocabulary (32k-152k logits per step and
// sequence), vectorised: a decode iteration of a batch of B runs B of these
// on the host, so a scalar pass with a libm exp per entry (0.2-1 ms at these
// sizes) would cost as much as the forward pass itself.
//
// Weights are exp(l - max) in float with the CPU kernels' exp (exp_approx.hpp,
// ~1 ulp); sums go through blocks of 16 floats added in double, in index
// order, so a total and the inverse CDF walked over the same weights agree.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace pensieve::model::sampler_math {

constexpr std::size_t block_floats = 16;

// The largest value (-inf for none, NaNs ignored).
float max_value(std::span<const float> x);

// The first index of the largest value: ties to the lowest index (the
// greedy rule). x is not empty; NaNs never win.
std::int32_t argmax(std::span<const float> x);

// x[i] /= divisor for every i.
void divide(std::span<float> x, float divisor);

// w[i] = exp(x[i] - max) for finite x[i], 0 for x[i] == -inf; max is
// max_value(x) (so every weight is in (0, 1]).
void exp_weights(std::span<const float> x, float max, std::span<float> w);

// w[i] = 0 where w[i] < floor.
void zero_below(std::span<float> w, float floor);

// The sum of w: each block of 16 summed in float, the blocks in double.
double sum(std::span<const float> w);

// Inverse CDF over w in index order, with sum()'s blocks: the first index
// whose cumulative weight passes target; zero weights are never chosen.
// target is in [0, sum(w)); at least one weight is positive.
std::int32_t draw(std::span<const float> w, double target);

// Appends every i with x[i] >= t to `out`, in increasing order.
void indices_at_least(std::span<const float> x, float t, std::vector<std::int32_t>& out);

// Where a filter's head of the order "more likely first" may start: every
// value at or above a threshold ranks ahead of every value below it, so
// sorting only those gives the same head as sorting all. The highest of
// max - 1, max - 2, max - 4, ..., max - 256 for which enough(t) holds, else
// the lowest float (the whole vocabulary).
template <class Enough>
float head_threshold(float max, Enough enough) {
  for (float d = 1.0f; d <= 256.0f; d *= 2.0f)
    if (enough(max - d)) return max - d;
  return std::numeric_limits<float>::lowest();
}

// How many x[i] >= t, and the sum of w[i] over those (sum()'s blocks).
std::size_t count_at_least(std::span<const float> x, float t);
double mass_at_least(std::span<const float> x, std::span<const float> w, float t);

// log(sum(exp(x))) (-inf entries count as 0): the log-softmax normaliser.
double log_sum_exp(std::span<const float> x);

// exp(x - max) for one value, with the same bits as exp_weights gives it.
float weight_of(float x, float max);

}  // namespace pensieve::model::sampler_math
