#pragma once
// Chat templates: turning a conversation into the prompt text a chat model
// was trained on. A model ships its template as Jinja source (GGUF
// tokenizer.chat_template, tokenizer_config.json); by default it is rendered
// as written, by the Jinja interpreter (gpu/text/jinja), with the request's
// tools. Named built-in templates render the common families in C++ (the
// --chat-template NAME override, and the fallback for a model without a
// template or with one the interpreter refuses):
//
//   llama2   [INST] with <<SYS>>          <s>[INST] <<SYS>>\n{sys}\n<</SYS>>\n\n{user} [/INST] {assistant} </s>
//   mistral  [INST] without <<SYS>>       <s>[INST] {user} [/INST]{assistant}</s>
//   llama3   <|start_header_id|>          <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>
//   chatml   <|im_start|> (Qwen, SmolLM)  <|im_start|>{role}\n{content}<|im_end|>\n
//   zephyr   <|user|>                     <|{role}|>\n{content}{eos}\n
//
// The rendered text never starts with BOS: encode it with add_bos as the
// model asks (Tokenizer::adds_bos_by_default) and with parse_special, so the
// markers become their control tokens; client text (contents, roles, tool
// calls) is kept apart from markup, in both kinds, so it never does.
//
// The stateful server renders only what a turn adds (continuation()): for
// the built-in families render(all) == render(all[0..k)) + the continuation;
// a Jinja template is rendered whole and the continuation is what follows
// the text the conversation already holds, or, where the template renders
// the earlier messages differently now (a date, tools, a stripped <think>),
// the whole conversation again. Immutable; any thread.
#include "runtime/error.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pensieve::model {

class Tokenizer;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool" (llama3/chatml/zephyr accept any role)
  std::string content;
  // OpenAI's tool fields, rendered by templates that know tools (a Jinja
  // template; the built-in families refuse them).
  std::string tool_calls;    // an assistant's calls: OpenAI's tool_calls array as JSON text; empty: none
  std::string tool_call_id;  // a tool result: the call it answers
  std::string name;          // a tool result: the function's name
  bool has_tool_fields() const { return !tool_calls.empty() || !tool_call_id.empty() || !name.empty(); }
};

// What a request adds to the template's context besides the messages.
struct ChatExtras {
  std::string tools;        // OpenAI's tools array as JSON text; empty: none
  std::string tool_choice;  // its tool_choice as JSON text; empty: absent
  bool empty() const { return tools.empty() && tool_choice.empty(); }
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

// The text of `segments`, markup and client text alike.
std::string chat_text(std::span<const ChatSegment> segments);

enum class ChatFamily { llama2, mistral, llama3, chatml, zephyr };

// What a turn appends to a conversation's prompt: `segments`, after the
// tokens the conversation holds; or, when `restart`, the whole conversation
// rendered again (the earlier messages render differently now), to be
// encoded from scratch (the KV of the longest common token prefix stays).
struct ChatContinuation {
  std::vector<ChatSegment> segments;
  bool restart = false;
  std::string text;  // what the conversation's tokens stand for once these are added (Jinja only)
};

class ChatTemplate {
 public:
  ChatTemplate(ChatFamily family, ChatSpecialTexts special, std::string default_system = {});

  // The model's own template (Jinja source); `name` says where it came from
  // ("the model's", a file). Errors name the line and column the
  // interpreter stopped at.
  static Result<ChatTemplate> from_jinja(std::string_view source, ChatSpecialTexts special,
                                         std::string name);

  bool is_jinja() const { return jinja_ != nullptr; }
  ChatFamily family() const { return family_; }  // built-in templates only
  std::string_view name() const;

  // What a turn adds to a conversation that holds messages[0..first),
  // whose tokens stand for `held` (the text a previous continuation()
  // returned; empty: not known, e.g. restored from the journal: the text of
  // messages[0..first) is taken). Built-in families ignore `held`.
  Result<ChatContinuation> continuation(std::span<const ChatMessage> messages, std::size_t first,
                                        std::string_view held, bool add_generation_prompt,
                                        const ChatExtras& extras = {}) const;

  // The whole conversation, then the assistant's header when
  // add_generation_prompt (for llama2 / mistral the user turn's [/INST] is
  // that header already). Fails where the family requires alternating
  // user/assistant turns and the conversation does not have them, or where
  // the template raises an exception.
  Result<std::string> render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                             const ChatExtras& extras = {}) const;

  // Only what messages[first..) add to render(messages[0..first), false).
  Result<std::string> render_continuation(std::span<const ChatMessage> messages, std::size_t first,
                                          bool add_generation_prompt) const;

  // The markup the template writes after an assistant reply's content (its
  // end of turn, e.g. "<|im_end|>\n"): what a stateful server appends to a
  // conversation after the tokens the model generated.
  std::string assistant_suffix() const;

  // The same text as render_continuation, cut into markup and client text
  // (encode it with Tokenizer::encode_pieces, markup parsed for specials).
  // Built-in families only.
  Result<std::vector<ChatSegment>> render_segments(std::span<const ChatMessage> messages,
                                                   std::size_t first, bool add_generation_prompt) const;

 private:
  struct Jinja;
  std::string_view jinja_name() const;
  std::string jinja_suffix() const;
  // The whole conversation as markup and client text (a Jinja template).
  Result<std::vector<ChatSegment>> jinja_segments(std::span<const ChatMessage> messages,
                                                  bool add_generation_prompt,
                                                  const ChatExtras& extras) const;
  Result<void> check_roles(std::span<const ChatMessage> messages) const;
  // The text message i contributes; depends on messages[0..i] only.
  void render_message(std::span<const ChatMessage> messages, std::size_t i,
                      std::vector<ChatSegment>& out) const;
  std::string generation_prompt() const;

  ChatFamily family_;
  ChatSpecialTexts special_;
  std::string default_system_;  // chatml (Qwen): system prompt used when none is given
  std::shared_ptr<const Jinja> jinja_;  // set: the model's own template
};

// Family names accepted by find_chat_template ("llama2", "mistral", ...).
std::vector<std::string_view> chat_template_names();

// A template by name (the --chat-template override); unknown names fail.
Result<ChatTemplate> find_chat_template(std::string_view name, ChatSpecialTexts special = {});

// Recognises the family of a Jinja template; an empty source gives the
// default (chatml); a template of no known family fails, naming the way out.
Result<ChatTemplate> detect_chat_template(std::string_view jinja_source, ChatSpecialTexts special = {});

ChatTemplate default_chat_template(ChatSpecialTexts special = {});

// The --chat-template override when one is given (a built-in's name, or the
// path of a Jinja file), else the template the tokenizer's model file carries
// (rendered by the interpreter; a template the interpreter refuses falls back
// to its recognised family, and `note` says so), else the default; BOS/EOS
// texts taken from the tokenizer.
Result<ChatTemplate> chat_template_for(const Tokenizer& tokenizer, std::string_view override_name = {},
                                       std::string* note = nullptr);

}  // namespace pensieve::model
