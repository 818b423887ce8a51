#include "gpu/model/sampler.hpp"

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

SampledToken Sampler::sample(std::span<const float> logits) {
  assert(static_cast<std::int32_t>(logits.size()) == vocab_.vocab_size &&
         "one logit per vocabulary entry");
  SampledToken out;
  if (greedy()) {
    work_.assign(logits.begin(), logits.end());
    apply_penalties(work_);
    mask_stops_before_min_tokens(work_);
    out.token = argmax_token(work_);
  } else {
    const double total = weigh_candidates(logits, work_, candidates_);
    out.token = draw(candidates_, next_uniform() * total);
  }
  const double lse = log_sum_exp(logits);
  out.logprob = static_cast<float>(logits[static_cast<std::size_t>(out.token)] - lse);
  if (params_.top_logprobs > 0) out.top = top_logprobs(logits, params_.top_logprobs, lse);
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
  std::vector<Candidate> candidates;
  const double total = weigh_candidates(logits, work, candidates);
  std::vector<TokenProbability> out;
  for (const Candidate& c : candidates)
    if (c.logit > 0.0f) out.push_back({c.token, c.logit / total});
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

double Sampler::weigh_candidates(std::span<const float> logits, std::vector<float>& work,
                                 std::vector<Candidate>& out) const {
  work.assign(logits.begin(), logits.end());
  apply_penalties(work);
  mask_stops_before_min_tokens(work);
  const float temperature = params_.temperature;
  out.clear();
  for (std::size_t i = 0; i < work.size(); ++i)
    if (work[i] != minus_infinity)
      out.push_back({work[i] / temperature, static_cast<std::int32_t>(i)});
  assert(!out.empty() && "every token is masked");
  filter_top_k_top_p(out);

  float max_logit = minus_infinity;
  for (const Candidate& c : out) max_logit = std::max(max_logit, c.logit);
  // min-p: p_i >= min_p * p_max  <=>  exp(l_i - l_max) >= min_p.
  const double min_weight = params_.min_p;
  double total = 0.0;
  for (Candidate& c : out) {
    const double w = std::exp(static_cast<double>(c.logit) - max_logit);
    c.logit = w >= min_weight ? static_cast<float>(w) : 0.0f;
    total += c.logit;
  }
  return total;
}

void Sampler::filter_top_k_top_p(std::vector<Candidate>& c) const {
  const auto order = [](const Candidate& a, const Candidate& b) { return more_likely(a, b); };
  const bool top_k_on = params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < c.size();
  const bool top_p_on = params_.top_p < 1.0f;
  if (top_k_on) {
    const auto kth = c.begin() + params_.top_k;
    std::nth_element(c.begin(), kth, c.end(), order);
    c.erase(kth, c.end());
  }
  if (!top_p_on) return;
  std::sort(c.begin(), c.end(), order);
  // Keep a token while the mass strictly ahead of it is below top_p (vLLM's
  // rule; the most likely token always stays).
  const double max_logit = c.front().logit;
  double total = 0.0;
  for (const Candidate& x : c) total += std::exp(static_cast<double>(x.logit) - max_logit);
  const double limit = static_cast<double>(params_.top_p) * total;
  double ahead = 0.0;
  std::size_t keep = 0;
  while (keep < c.size() && ahead < limit) {
    ahead += std::exp(static_cast<double>(c[keep].logit) - max_logit);
    ++keep;
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

std::int32_t argmax_token(std::span<const float> logits) {
  assert(!logits.empty());
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<std::int32_t>(best);
}

double log_sum_exp(std::span<const float> logits) {
  float max_logit = minus_infinity;
  for (float l : logits) max_logit = std::max(max_logit, l);
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  return static_cast<double>(max_logit) + std::log(sum);
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, std::int32_t n, double lse) {
  struct Entry {
    float logit;
    std::int32_t token;
  };
  std::vector<Entry> entries(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i)
    entries[i] = {logits[i], static_cast<std::int32_t>(i)};
  const std::size_t count = std::min(static_cast<std::size_t>(std::max(n, 0)), entries.size());
  std::partial_sort(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(count),
                    entries.end(), [](const Entry& a, const Entry& b) { return more_likely(a, b); });
  std::vector<TokenLogprob> out(count);
  for (std::size_t i = 0; i < count; ++i)
    out[i] = {entries[i].token, static_cast<float>(static_cast<double>(entries[i].logit) - lse)};
  return out;
}

}  // namespace pensieve::model
