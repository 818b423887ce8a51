#include "actors/model_identity.hpp"

#include <algorithm>
#include <cstring>

namespace pensieve::actors {

namespace {

// FNV-1a, 64 bits: an identity check, not a defence against forgery.
class Fnv {
 public:
  void bytes(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ULL;
  }
  template <class T>
  void pod(const T& v) {
    bytes(&v, sizeof v);
  }
  // Length first, so that ("ab", "c") and ("a", "bc") differ.
  void text(std::string_view s) {
    pod(std::uint64_t(s.size()));
    bytes(s.data(), s.size());
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 0xcbf29ce484222325ULL;
};

// A tensor's entry in the table: name, type, shape, and its first bytes
// (two fine-tunes of one base share the table; they rarely share those).
void add_tensor(Fnv& h, const model::Tensor& t) {
  h.text(t.name);
  h.pod(std::uint8_t(t.dtype));
  h.pod(std::uint64_t(t.shape.size()));
  for (std::int64_t d : t.shape) h.pod(d);
  h.pod(std::uint64_t(t.size_bytes));
  if (t.present()) h.bytes(t.data, std::min<std::size_t>(t.size_bytes, 64));
}

std::uint64_t tensor_table_hash(const model::ModelWeights& w) {
  Fnv h;
  add_tensor(h, w.token_embedding);
  for (const model::LayerWeights& l : w.layers) {
    for (const model::Tensor* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.q_norm,
                                   &l.k_norm, &l.post_attn_norm, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down,
                                   &l.post_ffn_norm}) {
      add_tensor(h, *t);
    }
  }
  add_tensor(h, w.output_norm);
  add_tensor(h, w.output);
  add_tensor(h, w.rope_freqs);
  return h.value();
}

std::uint64_t tokenizer_hash(const model::TokenizerData& t) {
  Fnv h;
  h.pod(std::uint8_t(t.kind));
  h.pod(std::uint64_t(t.tokens.size()));
  for (const auto& s : t.tokens) h.text(s);
  h.pod(std::uint64_t(t.scores.size()));
  if (!t.scores.empty()) h.bytes(t.scores.data(), t.scores.size() * sizeof(float));
  h.pod(std::uint64_t(t.token_types.size()));
  for (auto type : t.token_types) h.pod(std::uint8_t(type));
  h.pod(std::uint64_t(t.merges.size()));
  for (const auto& s : t.merges) h.text(s);
  h.text(t.pre);
  for (std::int32_t id : {t.bos_id, t.eos_id, t.eot_id, t.unk_id, t.pad_id}) h.pod(id);
  for (bool b : {t.add_bos, t.add_eos, t.add_space_prefix, t.split_at_space_mark}) h.pod(std::uint8_t(b));
  return h.value();
}

}  // namespace

JournalModel model_identity(const model::ModelWeights& weights, std::string_view chat_template_option,
                            const model::ChatTemplate& in_use) {
  JournalModel m;
  m.architecture = weights.config.architecture;
  m.name = weights.config.name;
  m.tensors = tensor_table_hash(weights);
  if (weights.tokenizer) m.tokenizer = tokenizer_hash(*weights.tokenizer);
  // A template file is known by its path: editing it in place goes unseen.
  Fnv t;
  t.text(weights.tokenizer ? weights.tokenizer->chat_template : std::string());
  t.text(chat_template_option);
  t.text(in_use.name());
  t.pod(std::uint8_t(in_use.is_jinja()));
  m.chat_template = t.value();
  return m;
}

std::uint64_t kv_identity(const JournalModel& model, const kv::KvPoolConfig& pool) {
  Fnv h;
  h.text("pensieve kv 1");
  h.text(model.architecture);
  h.pod(model.tensors);
  h.pod(model.tokenizer);
  h.pod(std::uint8_t(pool.dtype));
  h.pod(pool.block_tokens);
  h.pod(pool.n_layers);
  h.pod(pool.n_kv_heads);
  h.pod(pool.head_dim);
  // Q8_0 KV's blocks grew from 32 to 64 values on 2026-12-06: the width
  // joins the hash so that a chunk written in 32-value blocks is foreign
  // (recomputed) rather than misread. Other dtypes hash as before, so their
  // chunks stay readable.
  if (pool.dtype == kv::KvDType::q8_0) h.pod(std::int32_t(kv::kQ8KvBlockValues));
  return h.value();
}

}  // namespace pensieve::actors
