#include "gpu/text/chat_template.hpp"

#include "gpu/text/tokenizer.hpp"

#include <array>
#include <fstream>
#include <sstream>

namespace pensieve::model {

namespace {

struct FamilyName {
  ChatFamily family;
  std::string_view name;
};

constexpr std::array<FamilyName, 5> family_names = {{
    {ChatFamily::llama2, "llama2"},
    {ChatFamily::mistral, "mistral"},
    {ChatFamily::llama3, "llama3"},
    {ChatFamily::chatml, "chatml"},
    {ChatFamily::zephyr, "zephyr"},
}};

bool contains(std::string_view text, std::string_view marker) {
  return text.find(marker) != std::string_view::npos;
}

// Python's str.strip() / Jinja's trim for the ASCII whitespace that matters.
std::string trim(std::string_view s) {
  constexpr std::string_view space = " \t\n\r\f\v";
  const std::size_t begin = s.find_first_not_of(space);
  if (begin == std::string_view::npos) return {};
  const std::size_t end = s.find_last_not_of(space);
  return std::string(s.substr(begin, end - begin + 1));
}

std::string rtrim(std::string_view s) {
  const std::size_t end = s.find_last_not_of(" \t\n\r\f\v");
  return end == std::string_view::npos ? std::string() : std::string(s.substr(0, end + 1));
}

std::string known_names() {
  std::string names;
  for (const auto& f : family_names) names += (names.empty() ? "" : ", ") + std::string(f.name);
  return names;
}

// Qwen-style ChatML templates add a fixed system prompt when the conversation
// has none: '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n'.
// Only a literal counts: text with quotes or braces is template code.
std::string chatml_default_system(std::string_view jinja) {
  constexpr std::string_view open = "<|im_start|>system";
  constexpr std::string_view close = "<|im_end|>";
  for (std::size_t at = jinja.find(open); at != std::string_view::npos; at = jinja.find(open, at + 1)) {
    std::size_t begin = at + open.size();
    if (jinja.substr(begin, 2) == "\\n") {  // the Jinja string literal spells the newline \n
      begin += 2;
    } else if (jinja.substr(begin, 1) == "\n") {
      begin += 1;
    } else {
      continue;
    }
    const std::size_t end = jinja.find(close, begin);
    if (end == std::string_view::npos) return {};
    std::string text(jinja.substr(begin, end - begin));
    if (text.empty() || text.find_first_of("'\"{}<") != std::string::npos) continue;
    for (std::size_t nl = text.find("\\n"); nl != std::string::npos; nl = text.find("\\n", nl + 1)) {
      text.replace(nl, 2, "\n");
    }
    return text;
  }
  return {};
}

}  // namespace

ChatTemplate::ChatTemplate(ChatFamily family, ChatSpecialTexts special, std::string default_system)
    : family_(family), special_(std::move(special)), default_system_(std::move(default_system)) {}

std::string_view ChatTemplate::name() const {
  if (jinja_) return jinja_name();
  for (const auto& f : family_names) {
    if (f.family == family_) return f.name;
  }
  return "unknown";
}

Result<void> ChatTemplate::check_roles(std::span<const ChatMessage> messages) const {
  if (family_ != ChatFamily::llama2 && family_ != ChatFamily::mistral) return {};
  // A system message may only come first; then user and assistant alternate.
  const std::size_t start = !messages.empty() && messages[0].role == "system" ? 1 : 0;
  for (std::size_t i = start; i < messages.size(); ++i) {
    const char* expected = (i - start) % 2 == 0 ? "user" : "assistant";
    if (messages[i].role != expected) {
      return fail("chat template " + std::string(name()) + ": message " + std::to_string(i) +
                  " has role '" + messages[i].role + "' where '" + expected +
                  "' was expected (after an optional system message, user and assistant alternate)");
    }
  }
  return {};
}

namespace {

// Appends markup and client text, merging neighbours of the same kind.
struct SegmentWriter {
  std::vector<ChatSegment>& out;
  void add(std::string text, bool markup) {
    if (text.empty()) return;
    if (!out.empty() && out.back().markup == markup) {
      out.back().text += text;
    } else {
      out.push_back({std::move(text), markup});
    }
  }
  SegmentWriter& markup(std::string text) {
    add(std::move(text), true);
    return *this;
  }
  SegmentWriter& client(std::string text) {
    add(std::move(text), false);
    return *this;
  }
};

}  // namespace

void ChatTemplate::render_message(std::span<const ChatMessage> messages, std::size_t i,
                                  std::vector<ChatSegment>& out) const {
  const ChatMessage& m = messages[i];
  const bool has_system = messages[0].role == "system";
  SegmentWriter w{out};
  switch (family_) {
    case ChatFamily::llama2: {
      if (m.role == "system") return;  // folded into the first user turn
      if (m.role == "assistant") {
        w.markup(" ").client(trim(m.content)).markup(" " + special_.eos);
        return;
      }
      w.markup(i == (has_system ? 1u : 0u) ? "" : special_.bos).markup("[INST] ");
      if (has_system && i == 1) {
        // trim() of the whole "<<SYS>>...content" only touches its ends.
        w.markup("<<SYS>>\n").client(messages[0].content).markup("\n<</SYS>>\n\n").client(rtrim(m.content));
      } else {
        w.client(trim(m.content));
      }
      w.markup(" [/INST]");
      return;
    }
    case ChatFamily::mistral: {
      if (m.role == "system") return;
      if (m.role == "assistant") {
        w.client(m.content).markup(special_.eos);
        return;
      }
      w.markup("[INST] ");
      if (has_system && i == 1) w.client(messages[0].content).markup("\n\n");
      w.client(m.content).markup(" [/INST]");
      return;
    }
    case ChatFamily::llama3:
      w.markup("<|start_header_id|>").client(m.role).markup("<|end_header_id|>\n\n");
      w.client(trim(m.content)).markup("<|eot_id|>");
      return;
    case ChatFamily::chatml:
      if (i == 0 && !has_system && !default_system_.empty()) {
        w.markup("<|im_start|>system\n" + default_system_ + "<|im_end|>\n");
      }
      w.markup("<|im_start|>").client(m.role).markup("\n").client(m.content).markup("<|im_end|>\n");
      return;
    case ChatFamily::zephyr:
      w.markup("<|").client(m.role).markup("|>\n").client(m.content).markup(special_.eos + "\n");
      return;
  }
}

std::string ChatTemplate::assistant_suffix() const {
  if (jinja_) return jinja_suffix();
  switch (family_) {
    case ChatFamily::llama2: return " " + special_.eos;
    case ChatFamily::mistral: return special_.eos;
    case ChatFamily::llama3: return "<|eot_id|>";
    case ChatFamily::chatml: return "<|im_end|>\n";
    case ChatFamily::zephyr: return special_.eos + "\n";
  }
  return {};
}

std::string ChatTemplate::generation_prompt() const {
  switch (family_) {
    case ChatFamily::llama2:
    case ChatFamily::mistral: return {};
    case ChatFamily::llama3: return "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatFamily::chatml: return "<|im_start|>assistant\n";
    case ChatFamily::zephyr: return "<|assistant|>\n";
  }
  return {};
}

Result<std::string> ChatTemplate::render(std::span<const ChatMessage> messages,
                                         bool add_generation_prompt, const ChatExtras& extras) const {
  auto whole = continuation(messages, 0, {}, add_generation_prompt, extras);
  if (!whole) return whole.error();
  return Result<std::string>(boost::system::in_place_value, chat_text(whole->segments));
}

Result<std::vector<ChatSegment>> ChatTemplate::render_segments(std::span<const ChatMessage> messages,
                                                               std::size_t first,
                                                               bool add_generation_prompt) const {
  if (first > messages.size()) {
    return fail("chat template: continuation from message " + std::to_string(first) + " of " +
                std::to_string(messages.size()));
  }
  if (jinja_) {
    auto next = continuation(messages, first, {}, add_generation_prompt);
    if (!next) return next.error();
    if (next->restart) return fail("chat template (" + std::string(name()) + "): the earlier messages render differently now");
    return std::move(next->segments);
  }
  if (auto ok = check_roles(messages); !ok) return ok.error();
  std::vector<ChatSegment> segments;
  for (std::size_t i = first; i < messages.size(); ++i) render_message(messages, i, segments);
  if (add_generation_prompt) SegmentWriter{segments}.markup(generation_prompt());
  return segments;
}

Result<std::string> ChatTemplate::render_continuation(std::span<const ChatMessage> messages,
                                                      std::size_t first,
                                                      bool add_generation_prompt) const {
  auto segments = render_segments(messages, first, add_generation_prompt);
  if (!segments) return segments.error();
  // Error is constructible from a string too, so say which side this is.
  return Result<std::string>(boost::system::in_place_value, chat_text(*segments));
}

std::string chat_text(std::span<const ChatSegment> segments) {
  std::string text;
  for (const ChatSegment& s : segments) text += s.text;
  return text;
}

std::vector<std::string_view> chat_template_names() {
  std::vector<std::string_view> names;
  for (const auto& f : family_names) names.push_back(f.name);
  return names;
}

Result<ChatTemplate> find_chat_template(std::string_view name, ChatSpecialTexts special) {
  for (const auto& f : family_names) {
    if (f.name == name) return ChatTemplate(f.family, std::move(special));
  }
  return fail("unknown chat template '" + std::string(name) + "' (known: " + known_names() + ")");
}

Result<ChatTemplate> detect_chat_template(std::string_view jinja, ChatSpecialTexts special) {
  if (trim(jinja).empty()) return default_chat_template(std::move(special));
  if (contains(jinja, "<|im_start|>")) {
    return ChatTemplate(ChatFamily::chatml, std::move(special), chatml_default_system(jinja));
  }
  if (contains(jinja, "<|start_header_id|>") && contains(jinja, "<|end_header_id|>")) {
    return ChatTemplate(ChatFamily::llama3, std::move(special));
  }
  if (contains(jinja, "[INST]")) {
    return ChatTemplate(contains(jinja, "<<SYS>>") ? ChatFamily::llama2 : ChatFamily::mistral,
                        std::move(special));
  }
  if (contains(jinja, "<|user|>") && !contains(jinja, "<|end|>")) {
    // StableLM-Zephyr ends turns with a literal <|endoftext|>; Zephyr uses eos_token.
    if (contains(jinja, "<|endoftext|>")) special.eos = "<|endoftext|>";
    return ChatTemplate(ChatFamily::zephyr, std::move(special));
  }
  return fail("the model's chat template is of no family Pensieve knows (" + known_names() +
              "); choose one with --chat-template NAME");
}

ChatTemplate default_chat_template(ChatSpecialTexts special) {
  return ChatTemplate(ChatFamily::chatml, std::move(special));
}

namespace {

// A --chat-template value that names a file rather than a built-in.
bool names_file(std::string_view v) {
  return v.find('/') != std::string_view::npos || v.ends_with(".jinja") || v.ends_with(".j2");
}

}  // namespace

Result<ChatTemplate> chat_template_for(const Tokenizer& tokenizer, std::string_view override_name,
                                       std::string* note) {
  ChatSpecialTexts special;
  if (const auto bos = tokenizer.bos_id()) special.bos = tokenizer.token_to_piece(*bos, true);
  if (const auto eos = tokenizer.eos_id()) special.eos = tokenizer.token_to_piece(*eos, true);
  if (!override_name.empty() && names_file(override_name)) {
    std::ifstream in{std::string(override_name), std::ios::binary};
    if (!in) return fail("--chat-template: cannot read '" + std::string(override_name) + "'");
    std::ostringstream source;
    source << in.rdbuf();
    return ChatTemplate::from_jinja(source.str(), std::move(special), std::string(override_name));
  }
  if (!override_name.empty()) return find_chat_template(override_name, std::move(special));
  const std::string& own = tokenizer.chat_template();
  if (trim(own).empty()) return default_chat_template(std::move(special));
  auto jinja = ChatTemplate::from_jinja(own, special, "the model's");
  if (jinja) return jinja;
  // A template the interpreter refuses: its family's built-in, if it has one.
  auto family = detect_chat_template(own, std::move(special));
  if (!family) {
    return fail(jinja.error().message + "; and it is of no built-in family (" + known_names() +
                "): choose one with --chat-template NAME|FILE");
  }
  if (note) {
    *note = jinja.error().message + "; rendering it as the built-in '" + std::string(family->name()) + "'";
  }
  return family;
}

}  // namespace pensieve::model
