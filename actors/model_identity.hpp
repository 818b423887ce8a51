#pragma once
// The identity of the served model as the history journal records it
// (actors/history_record.hpp, JournalModel): a journal's token ids mean
// something only under the weights, vocabulary and chat template that wrote
// them. Hashes, not contents: cheap at start-up, and enough to tell two
// models apart.
#include "actors/history_record.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "gpu/model/model_weights.hpp"
#include "gpu/text/chat_template.hpp"

#include <string_view>

namespace pensieve::actors {

// `chat_template_option`: the --chat-template value (empty: the model's
// own); `in_use`: the template it resolved to.
JournalModel model_identity(const model::ModelWeights& weights, std::string_view chat_template_option,
                            const model::ChatTemplate& in_use);

// The identity the disk KV tier stamps on its chunks: a chunk's K and V
// mean something only under the weights and tokenizer that computed them
// and the KV layout (dtype, block, heads) they are stored in. The chat
// template is left out: the KV of given token ids does not depend on it.
std::uint64_t kv_identity(const JournalModel& model, const kv::KvPoolConfig& pool);

}  // namespace pensieve::actors
