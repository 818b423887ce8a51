#include "bench/pensieve-sim/sim_workload.hpp"

#include "bench/pensieve-bench/dataset.hpp"

#include <algorithm>

namespace pensieve::sim {

std::size_t Workload::turns() const {
  std::size_t n = 0;
  for (const auto& c : conversations) n += c.turns.size();
  return n;
}

namespace {

std::int32_t estimate_tokens(const std::string& text) {
  return std::int32_t(std::max<std::size_t>(1, (bench::utf8_chars(text) + 3) / 4));
}

}  // namespace

Result<Workload> load_workload(const std::string& path, const WorkloadOptions& o) {
  auto data = bench::load_dataset(path);
  if (!data) return fail("--data " + path + ": " + data.error().message);
  Workload w;
  w.source = path;
  for (const bench::Conversation& c : *data) {
    SimConversation conv;
    std::int64_t context = 0;
    std::int32_t pending_system = 0;
    for (std::size_t i = 0; i < c.turns.size(); ++i) {
      const auto& m = c.turns[i];
      if (m.role == "system") {
        pending_system += estimate_tokens(m.content) + o.template_tokens;
        continue;
      }
      if (m.role != "user") continue;  // an assistant message is read with its user turn
      SimTurn t;
      t.user_tokens = pending_system + estimate_tokens(m.content) + o.template_tokens;
      pending_system = 0;
      t.output_tokens = 128;  // a last user message with no reply in the data
      if (i + 1 < c.turns.size() && c.turns[i + 1].role == "assistant")
        t.output_tokens = estimate_tokens(c.turns[i + 1].content);
      t.output_tokens = std::min(t.output_tokens, o.max_output_tokens);
      if (context + t.user_tokens + t.output_tokens > o.max_context) break;
      context += t.user_tokens + t.output_tokens;
      conv.turns.push_back(t);
    }
    if (!conv.turns.empty()) w.conversations.push_back(std::move(conv));
    if (o.max_conversations > 0 && w.conversations.size() >= o.max_conversations) break;
  }
  // More conversations than the data holds: the data again, as new
  // conversations (their token ids differ: the simulator draws them per
  // conversation), until there are enough.
  w.conversations.reserve(std::max(o.max_conversations, w.conversations.size()));  // no reallocation under the copies
  for (std::size_t i = 0, n = w.conversations.size(); n > 0 && w.conversations.size() < o.max_conversations; ++i)
    w.conversations.push_back(w.conversations[i % n]);
  if (w.conversations.empty()) return fail("--data " + path + ": no conversation fits the model's context");
  return w;
}

}  // namespace pensieve::sim
