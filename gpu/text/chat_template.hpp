#pragma once
// Chat templates: turning a conversation into the prompt text a chat model
// was trained on. Models ship their template as Jinja source (GGUF
// tokenizer.chat_template, tokenizer_config.json); we do not run Jinja but
// recognise the common families by distinctive markers and render them in C++:
//
//   llama2   [INST] with <<SYS>>          <s>[INST] <<SYS>>\n{sys}\n<</SYS>>\n\n{user} [/INST] {assistant} </s>
//   mistral  [INST] without <<SYS>>       <s>[INST] {user} [/INST]{assistant}</s>
//   llama3   <|start_header_id|>          <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>
//   chatml   <|im_start|> (Qwen, SmolLM)  <|im_start|>{role}\n{content}<|im_end|>\n
//   zephyr   <|user|>                     <|{role}|>\n{content}{eos}\n
//
// The rendered text never starts with BOS: encode it with add_bos as the
// model asks (Tokenizer::adds_bos_by_default) and with parse_special, so the
// markers become their control tokens. A model with no template gets chatml
// (default_chat_template), the most widely understood format.
//
// render(all) == render(all[0..k)) + render_continuation(all, k): the stateful
// server renders only the messages appended to a conversation whose earlier
// tokens it already holds. Immutable; any thread.
#include "runtime/error.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pensieve::model {

class Tokenizer;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (llama3/chatml/zephyr accept any role)
  std::string content;
};

// Texts of the model's BOS and EOS tokens, which some templates write inside
// the conversation.
struct ChatSpecialTexts {
  std::string bos = "<s>";
  std::string eos = "</s>";
};

// A stretch of rendered prompt: template markup (which may spell control
// tokens such as "<|im_start|>") or text a client sent (message content and
// roles), which must never turn into control tokens: a user who writes
// "<|im_end|>" must not be able to close their own turn.
struct ChatSegment {
  std::string text;
  bool markup = false;
};

enum class ChatFamily { llama2, mistral, llama3, chatml, zephyr };

class ChatTemplate {
 public:
  ChatTemplate(ChatFamily family, ChatSpecialTexts special, std::string default_system = {});

  ChatFamily family() const { return family_; }
  std::string_view name() const;

  // The whole conversation, then the assistant's header when
  // add_generation_prompt (for llama2 / mistral the user turn's [/INST] is
  // that header already). Fails where the family requires alternating
  // user/assistant turns and the conversation does not have them.
  Result<std::string> render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  // Only what messages[first..) add to render(messages[0..first), false).
  Result<std::string> render_continuation(std::span<const ChatMessage> messages, std::size_t first,
                                          bool add_generation_prompt) const;

  // The markup the template writes after an assistant reply's content (its
  // end of turn, e.g. "<|im_end|>\n"): what a stateful server appends to a
  // conversation after the tokens the model generated.
  std::string assistant_suffix() const;

  // The same text as render_continuation, cut into markup and client text
  // (encode it with Tokenizer::encode_pieces, markup parsed for specials).
  Result<std::vector<ChatSegment>> render_segments(std::span<const ChatMessage> messages,
                                                   std::size_t first, bool add_generation_prompt) const;

 private:
  Result<void> check_roles(std::span<const ChatMessage> messages) const;
  // The text message i contributes; depends on messages[0..i] only.
  void render_message(std::span<const ChatMessage> messages, std::size_t i,
                      std::vector<ChatSegment>& out) const;
  std::string generation_prompt() const;

  ChatFamily family_;
  ChatSpecialTexts special_;
  std::string default_system_;  // chatml (Qwen): system prompt used when none is given
};

// Family names accepted by find_chat_template ("llama2", "mistral", ...).
std::vector<std::string_view> chat_template_names();

// A template by name (the --chat-template override); unknown names fail.
Result<ChatTemplate> find_chat_template(std::string_view name, ChatSpecialTexts special = {});

// Recognises the family of a Jinja template; an empty source gives the
// default (chatml); a template of no known family fails, naming the way out.
Result<ChatTemplate> detect_chat_template(std::string_view jinja_source, ChatSpecialTexts special = {});

ChatTemplate default_chat_template(ChatSpecialTexts special = {});

// The override when one is named, else the template the tokenizer's model
// file carries, else the default; BOS/EOS texts taken from the tokenizer.
Result<ChatTemplate> chat_template_for(const Tokenizer& tokenizer, std::string_view override_name = {});

}  // namespace pensieve::model
