#include "gpu/model/sampler.hpp"

#include "gpu/model/sampler_math.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <utility>

namespace pensieve::model {
namespace {

constexpr float minus_infinity = -std::numeric_limits<float>::infinity();
constexpr std::int32_t max_top_logprobs = 20;  // the OpenAI API's cap

bool contains(const std::vector<std::int32_t>& ids, std::int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// Strict order "more likely first, then lower id": a total order on distinct
// ids, so sorting is deterministic whatever the standard library.
template <class T>
bool more_likely(const T& a, const T& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
}

}  // namespace

namespace {

// Inverse CDF: the first candidate whose cumulative weight passes `target`
// (a uniform draw times the total weight); zero weights are filtered out.
template <class C>
std::int32_t draw(const std::vector<C>& candidates, double target) {
  double cumulative = 0.0;
  std::int32_t last_kept = candidates.front().token;
  for (const C& c : candidates) {
    if (c.logit == 0.0f) continue;
    cumulative += c.logit;
    last_kept = c.token;
    if (target < cumulative) return c.token;
  }
  return last_kept;  // reached only through rounding at the very end
}

}  // namespace

std::string validate(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    return "temperature must be a finite number >= 0";
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return "top_p must be in (0, 1]";
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return "min_p must be in [0, 1]";
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty))
    return "repetition_penalty must be a finite number > 0";
  if (!std::isfinite(p.presence_penalty)) return "presence_penalty must be finite";
  if (!std::isfinite(p.frequency_penalty)) return "frequency_penalty must be finite";
  if (p.top_logprobs < 0 || p.top_logprobs > max_top_logprobs)
    return "top_logprobs must be in [0, 20]";
  if (p.max_tokens < 1) return "max_tokens must be >= 1";
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens)
    return "min_tokens must be in [0, max_tokens]";
  return {};
}

Sampler::Sampler(SamplingParams params, VocabInfo vocab, std::span<const std::int32_t> prompt)
    : params_(std::move(params)),
      vocab_(std::move(vocab)),
      rng_(params_.seed),
      output_counts_(static_cast<std::size_t>(vocab_.vocab_size), 0),
      seen_(static_cast<std::size_t>(vocab_.vocab_size), 0) {
  assert(vocab_.vocab_size > 0 && "a vocabulary has at least one token");
  assert(validate(params_).empty() && "sampling params must be validated first");
  for (std::int32_t token : prompt) {
    assert(token >= 0 && token < vocab_.vocab_size && "prompt token outside the vocabulary");
    if (!seen_[static_cast<std::size_t>(token)]) {
      seen_[static_cast<std::size_t>(token)] = 1;
      seen_tokens_.push_back(token);
    }
  }
}

SampledToken Sampler::sample(std::span<const float> logits, Scratch& scratch) {
  assert(static_cast<std::int32_t>(logits.size()) == vocab_.vocab_size &&
         "one logit per vocabulary entry");
  SampledToken out;
  if (greedy() && !penalties_on() && generated_ >= params_.min_tokens) {
    out.token = argmax_token(logits);  // nothing to change: no copy
  } else if (greedy()) {
    std::vector<float>& work = scratch.scaled;
    work.assign(logits.begin(), logits.end());
    apply_penalties(work);
    mask_stops_before_min_tokens(work);
    out.token = argmax_token(work);
  } else {
    const Weighed w = weigh(logits, scratch);
    const double target = next_uniform() * w.total;
    out.token = w.dense ? sampler_math::draw(scratch.weights, target) : draw(scratch.candidates, target);
  }
  // The normaliser costs an exp per vocabulary entry, more than the rest of a
  // greedy step: only for a request that asked for logprobs.
  if (params_.logprobs || params_.top_logprobs > 0) {
    const double lse = log_sum_exp(logits);
    out.logprob = static_cast<float>(logits[static_cast<std::size_t>(out.token)] - lse);
    if (params_.top_logprobs > 0) out.top = top_logprobs(logits, params_.top_logprobs, lse);
  }
  record(out.token);
  return out;
}

std::vector<TokenProbability> Sampler::distribution(std::span<const float> logits) const {
  assert(static_cast<std::int32_t>(logits.size()) == vocab_.vocab_size &&
         "one logit per vocabulary entry");
  std::vector<float> work;
  if (greedy()) {
    work.assign(logits.begin(), logits.end());
    apply_penalties(work);
    mask_stops_before_min_tokens(work);
    return {{argmax_token(work), 1.0}};
  }
  Scratch scratch;
  const Weighed w = weigh(logits, scratch);
  std::vector<TokenProbability> out;
  if (w.dense) {
    for (std::size_t i = 0; i < scratch.weights.size(); ++i)
      if (scratch.weights[i] > 0.0f) out.push_back({std::int32_t(i), scratch.weights[i] / w.total});
    return out;
  }
  for (const Candidate& c : scratch.candidates)
    if (c.logit > 0.0f) out.push_back({c.token, c.logit / w.total});
  return out;
}

FinishReason Sampler::finish_reason(std::int32_t token) const {
  if (!params_.ignore_eos && contains(vocab_.eos_ids, token)) return FinishReason::stop;
  if (contains(params_.stop_token_ids, token)) return FinishReason::stop;
  if (generated_ >= params_.max_tokens) return FinishReason::length;
  return FinishReason::none;
}

void Sampler::apply_penalties(std::vector<float>& logits) const {
  const float rep = params_.repetition_penalty;
  const float freq = params_.frequency_penalty;
  const float presence = params_.presence_penalty;
  for (std::int32_t token : seen_tokens_) {
    float& l = logits[static_cast<std::size_t>(token)];
    if (rep != 1.0f) l = l > 0.0f ? l / rep : l * rep;
    const std::int32_t count = output_counts_[static_cast<std::size_t>(token)];
    if (count > 0) l -= freq * static_cast<float>(count) + presence;
  }
}

void Sampler::mask_stops_before_min_tokens(std::vector<float>& logits) const {
  if (generated_ >= params_.min_tokens) return;
  if (!params_.ignore_eos)
    for (std::int32_t id : vocab_.eos_ids) logits[static_cast<std::size_t>(id)] = minus_infinity;
  for (std::int32_t id : params_.stop_token_ids)
    if (id >= 0 && id < vocab_.vocab_size) logits[static_cast<std::size_t>(id)] = minus_infinity;
}

Sampler::Weighed Sampler::weigh(std::span<const float> logits, Scratch& s) const {
  namespace sm = sampler_math;
  s.scaled.assign(logits.begin(), logits.end());
  apply_penalties(s.scaled);
  mask_stops_before_min_tokens(s.scaled);
  sm::divide(s.scaled, params_.temperature);
  const float max = sm::max_value(s.scaled);
  assert(max != minus_infinity && "every token is masked");
  s.weights.resize(s.scaled.size());
  const bool top_k_on = params_.top_k > 0 &&
                        static_cast<std::size_t>(params_.top_k) <
                            sm::count_at_least(s.scaled, std::numeric_limits<float>::lowest());
  const bool top_p_on = params_.top_p < 1.0f;
  if (!top_k_on) sm::exp_weights(s.scaled, max, s.weights);  // with top-k: the k kept only, below
  if (!top_k_on && !top_p_on) {
    // min-p: p_i >= min_p * p_max  <=>  w_i >= min_p (the largest weight is 1).
    if (params_.min_p > 0.0f) sm::zero_below(s.weights, params_.min_p);
    return {sm::sum(s.weights), true};
  }
  // The filters keep a head of the order "more likely first": sorted only
  // from a threshold that holds what the filter needs (k tokens, or top_p of
  // the mass).
  const double all_mass = top_k_on ? 0.0 : sm::sum(s.weights);
  const float threshold = sm::head_threshold(max, [&](float t) {
    return top_k_on
               ? sm::count_at_least(s.scaled, t) >= static_cast<std::size_t>(params_.top_k)
               : sm::mass_at_least(s.scaled, s.weights, t) >= 1.0001 * params_.top_p * all_mass;
  });
  filter_top_k_top_p(s, threshold, top_k_on, max, all_mass, s.candidates);
  double total = 0.0;
  for (Candidate& c : s.candidates) {
    const float w = s.weights[static_cast<std::size_t>(c.token)];
    c.logit = w >= params_.min_p ? w : 0.0f;
    total += c.logit;
  }
  return {total, false};
}

void Sampler::filter_top_k_top_p(Scratch& s, float threshold, bool top_k_on, float max, double all_mass,
                                 std::vector<Candidate>& c) const {
  namespace sm = sampler_math;
  const auto order = [](const Candidate& a, const Candidate& b) { return more_likely(a, b); };
  s.indices.clear();
  sm::indices_at_least(s.scaled, threshold, s.indices);
  c.clear();
  for (const std::int32_t i : s.indices) c.push_back({s.scaled[static_cast<std::size_t>(i)], i});
  assert(!c.empty() && "every token is masked");
  if (top_k_on) {
    if (static_cast<std::size_t>(params_.top_k) < c.size()) {
      const auto kth = c.begin() + params_.top_k;
      std::nth_element(c.begin(), kth, c.end(), order);
      c.erase(kth, c.end());
    }
    for (const Candidate& x : c) s.weights[static_cast<std::size_t>(x.token)] = sm::weight_of(x.logit, max);
  }
  // Draw order is the order itself, whatever the selection left.
  std::sort(c.begin(), c.end(), order);
  if (params_.top_p >= 1.0f) return;
  // Keep a token while the mass strictly ahead of it is below top_p (vLLM's
  // rule; the most likely token always stays); after top-k the mass is that
  // of the k kept.
  const auto weight = [&](const Candidate& x) { return double(s.weights[static_cast<std::size_t>(x.token)]); };
  double total = all_mass;
  if (top_k_on) {
    total = 0.0;
    for (const Candidate& x : c) total += weight(x);
  }
  const double limit = static_cast<double>(params_.top_p) * total;
  double ahead = 0.0;
  std::size_t keep = 0;
  while (keep < c.size() && ahead < limit) {
    ahead += weight(c[keep]);
    ++keep;
  }
  if (ahead < limit && !top_k_on && threshold != std::numeric_limits<float>::lowest()) {
    // The head ran out by rounding (its mass was just above the limit when
    // summed in blocks): take every token.
    filter_top_k_top_p(s, std::numeric_limits<float>::lowest(), false, max, all_mass, c);
    return;
  }
  c.resize(keep);
}

void Sampler::record(std::int32_t token) {
  ++generated_;
  ++output_counts_[static_cast<std::size_t>(token)];
  if (!seen_[static_cast<std::size_t>(token)]) {
    seen_[static_cast<std::size_t>(token)] = 1;
    seen_tokens_.push_back(token);
  }
}

double Sampler::next_uniform() {
  // The top 53 bits as a double in [0, 1): mt19937_64's output is specified
  // by the standard, so the draws are the same with every library.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

std::int32_t argmax_token(std::span<const float> logits) { return sampler_math::argmax(logits); }

double log_sum_exp(std::span<const float> logits) { return sampler_math::log_sum_exp(logits); }

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, std::int32_t n, double lse) {
  struct Entry {
    float logit;
    std::int32_t token;
  };
  const std::size_t count = std::min(static_cast<std::size_t>(std::max(n, 0)), logits.size());
  if (count == 0) return {};
  // As for top-k: only the head that holds `count` tokens is sorted.
  const float threshold = sampler_math::head_threshold(
      sampler_math::max_value(logits),
      [&](float t) { return sampler_math::count_at_least(logits, t) >= count; });
  std::vector<std::int32_t> indices;
  sampler_math::indices_at_least(logits, threshold, indices);
  std::vector<Entry> entries;
  entries.reserve(indices.size());
  for (const std::int32_t i : indices) entries.push_back({logits[static_cast<std::size_t>(i)], i});
  if (entries.size() < count) {  // NaN or -inf logits below every threshold: take every token
    entries.clear();
    for (std::size_t i = 0; i < logits.size(); ++i) entries.push_back({logits[i], static_cast<std::int32_t>(i)});
  }
  std::partial_sort(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(count),
                    entries.end(), [](const Entry& a, const Entry& b) { return more_likely(a, b); });
  std::vector<TokenLogprob> out(count);
  for (std::size_t i = 0; i < count; ++i)
    out[i] = {entries[i].token, static_cast<float>(static_cast<double>(entries[i].logit) - lse)};
  return out;
}

}  // namespace pensieve::model
