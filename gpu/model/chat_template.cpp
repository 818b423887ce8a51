#include "gpu/model/chat_template.hpp"

#include "gpu/model/tokenizer.hpp"

#include <array>

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

std::string ChatTemplate::render_message(std::span<const ChatMessage> messages, std::size_t i) const {
  const ChatMessage& m = messages[i];
  const bool has_system = messages[0].role == "system";
  switch (family_) {
    case ChatFamily::llama2: {
      if (m.role == "system") return {};  // folded into the first user turn
      if (m.role == "assistant") return " " + trim(m.content) + " " + special_.eos;
      std::string content = m.content;
      if (has_system && i == 1) content = "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + content;
      return (i == (has_system ? 1u : 0u) ? "" : special_.bos) + "[INST] " + trim(content) + " [/INST]";
    }
    case ChatFamily::mistral: {
      if (m.role == "system") return {};
      if (m.role == "assistant") return m.content + special_.eos;
      const std::string system = has_system && i == 1 ? messages[0].content + "\n\n" : "";
      return "[INST] " + system + m.content + " [/INST]";
    }
    case ChatFamily::llama3:
      return "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
    case ChatFamily::chatml: {
      std::string text;
      if (i == 0 && !has_system && !default_system_.empty()) {
        text = "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
      }
      return text + "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    }
    case ChatFamily::zephyr:
      return "<|" + m.role + "|>\n" + m.content + special_.eos + "\n";
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
                                         bool add_generation_prompt) const {
  return render_continuation(messages, 0, add_generation_prompt);
}

Result<std::string> ChatTemplate::render_continuation(std::span<const ChatMessage> messages,
                                                      std::size_t first,
                                                      bool add_generation_prompt) const {
  if (first > messages.size()) {
    return fail("chat template: continuation from message " + std::to_string(first) + " of " +
                std::to_string(messages.size()));
  }
  if (auto ok = check_roles(messages); !ok) return ok.error();
  std::string text;
  for (std::size_t i = first; i < messages.size(); ++i) text += render_message(messages, i);
  if (add_generation_prompt) text += generation_prompt();
  // Error is constructible from a string too, so say which side this is.
  return Result<std::string>(boost::system::in_place_value, std::move(text));
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

Result<ChatTemplate> chat_template_for(const Tokenizer& tokenizer, std::string_view override_name) {
  ChatSpecialTexts special;
  if (const auto bos = tokenizer.bos_id()) special.bos = tokenizer.token_to_piece(*bos, true);
  if (const auto eos = tokenizer.eos_id()) special.eos = tokenizer.token_to_piece(*eos, true);
  if (!override_name.empty()) return find_chat_template(override_name, std::move(special));
  return detect_chat_template(tokenizer.chat_template(), std::move(special));
}

}  // namespace pensieve::model
