#pragma once
// Turning one step's logits into the next token of one request.
//
// A Sampler belongs to one request and is used from whichever single thread
// runs that request's sampling step (it is not shared). It owns the request's
// PRNG and the token counts the penalties need, so its draws depend only on
// its own seed and the logits it is given, never on other requests.
//
// Order of operations (as vLLM / llama.cpp): penalties, temperature, top-k,
// top-p, min-p, then one draw. Reported logprobs are the log-softmax of the
// raw logits (before penalties and temperature), as the OpenAI API reports.
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace pensieve::model {

struct SamplingParams {
  // Below 1e-5 (vLLM's epsilon), 0 included: greedy, ties to the lowest id.
  float temperature = 1.0f;
  std::int32_t top_k = 0;    // keep the k most likely tokens; 0 or <0 = off
  float top_p = 1.0f;        // keep the smallest head of mass >= top_p; 1 = off
  float min_p = 0.0f;        // keep tokens with p >= min_p * p_max; 0 = off
  // > 1 discourages every token seen in the prompt or the output (CTRL-style:
  // positive logits divided, negative ones multiplied).
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;   // subtracted once from each token already generated
  float frequency_penalty = 0.0f;  // subtracted per occurrence in the generated text
  std::uint64_t seed = 0;
  bool logprobs = false;           // report the chosen token's logprob
  std::int32_t top_logprobs = 0;   // and this many alternatives
  std::vector<std::int32_t> stop_token_ids;  // end the request (besides EOS)
  std::vector<std::string> stop_strings;     // see StopMatcher
  std::int32_t max_tokens = 16;
  std::int32_t min_tokens = 0;  // EOS and stop ids cannot be drawn before this many
  bool ignore_eos = false;      // EOS is an ordinary token: it neither stops nor is masked
};

struct TokenLogprob {
  std::int32_t token = 0;
  float logprob = 0.0f;

  friend bool operator==(const TokenLogprob&, const TokenLogprob&) = default;
};

struct SampledToken {
  std::int32_t token = 0;
  // Only when the request asked (params.logprobs or top_logprobs > 0); else 0.
  float logprob = 0.0f;              // log-softmax of the raw logits at `token`
  std::vector<TokenLogprob> top;     // params.top_logprobs best, most likely first
};

struct TokenProbability {
  std::int32_t token = 0;
  double probability = 0.0;
};

enum class FinishReason : std::uint8_t { none, stop, length };

// What the Sampler needs to know about the model, not the request.
struct VocabInfo {
  std::int32_t vocab_size = 0;
  std::vector<std::int32_t> eos_ids;  // EOS and end-of-turn ids
};

// Checks params for values no sampler can honour (negative temperature,
// top_p outside (0, 1], ...). Returns an empty string when they are fine, or
// a message naming the field.
std::string validate(const SamplingParams& params);

class Sampler {
 public:
  // `prompt` seeds the repetition penalty. params must pass validate().
  Sampler(SamplingParams params, VocabInfo vocab, std::span<const std::int32_t> prompt);

  struct Candidate {
    float logit;
    std::int32_t token;
  };
  // A step's scratch (a few vocabularies of floats), reusable across steps
  // and samplers: a thread sampling many requests keeps one, not one each.
  struct Scratch {
    std::vector<float> scaled;   // penalised, masked logits / temperature
    std::vector<float> weights;  // exp(scaled - max), 0 where masked (with top-k: the kept only)
    std::vector<Candidate> candidates;
    std::vector<std::int32_t> indices;
  };

  // Picks the next token from one step's logits (vocab_size values) and
  // records it as generated.
  SampledToken sample(std::span<const float> logits) { return sample(logits, scratch_); }
  SampledToken sample(std::span<const float> logits, Scratch& scratch);

  // The distribution the next sample() would draw from for these logits
  // (after penalties, masks, temperature and filters), in draw order; a
  // single token with probability 1 when greedy. Does not change the state.
  std::vector<TokenProbability> distribution(std::span<const float> logits) const;

  // Whether the request ends after `token`, the latest one sample() returned.
  FinishReason finish_reason(std::int32_t token) const;

  std::int32_t generated_tokens() const { return generated_; }
  bool greedy() const { return params_.temperature < greedy_below_temperature; }
  static constexpr float greedy_below_temperature = 1e-5f;
  const SamplingParams& params() const { return params_; }

 private:
  bool penalties_on() const {
    return params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f ||
           params_.frequency_penalty != 0.0f;
  }
  void apply_penalties(std::vector<float>& logits) const;
  void mask_stops_before_min_tokens(std::vector<float>& logits) const;

  // What weigh() left for the draw: with no top-k / top-p the weights in id
  // order (scratch.weights); else the kept candidates in draw order, their
  // weights in `logit`.
  struct Weighed {
    double total = 0.0;
    bool dense = true;
  };
  Weighed weigh(std::span<const float> logits, Scratch& s) const;
  // The candidates top-k (when on) and top-p keep, from every token whose
  // scaled logit is at least `threshold`, in draw order; all_mass is the
  // weights' sum over every token (top-p's reference without top-k).
  // With top-k, writes the kept tokens' weights (max: the largest scaled
  // logit); without, reads scratch.weights.
  void filter_top_k_top_p(Scratch& s, float threshold, bool top_k_on, float max, double all_mass,
                          std::vector<Candidate>& out) const;
  void record(std::int32_t token);
  double next_uniform();  // in [0, 1), from the generator's bits only

  SamplingParams params_;
  VocabInfo vocab_;
  std::mt19937_64 rng_;
  std::vector<std::int32_t> output_counts_;  // per token, generated only
  std::vector<std::uint8_t> seen_;           // per token, prompt or generated
  std::vector<std::int32_t> seen_tokens_;    // the ids with seen_ set, to touch only those
  std::int32_t generated_ = 0;
  Scratch scratch_;  // sample(logits)'s; empty until used
};

// Greedy choice: the largest logit, ties to the lowest id.
std::int32_t argmax_token(std::span<const float> logits);

// log(sum(exp(logits))), the normaliser of the log-softmax, in double.
double log_sum_exp(std::span<const float> logits);

// The `n` most likely tokens with their log-softmax values, most likely first
// (ties to the lowest id); `lse` is log_sum_exp(logits).
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, std::int32_t n, double lse);

}  // namespace pensieve::model
