// ChatTemplate's Jinja half: the model's own template, rendered by the
// interpreter over the messages and the request's tools, and the stateful
// continuation of a conversation by the text it already holds.
#include "gpu/text/chat_template.hpp"

#include "gpu/text/jinja/json_value.hpp"
#include "gpu/text/jinja/strftime.hpp"
#include "gpu/text/jinja/template.hpp"

#include <boost/json/parse.hpp>

#include <ctime>
#include <optional>

namespace pensieve::model {

namespace jinja = text::jinja;
namespace json = boost::json;

struct ChatTemplate::Jinja {
  jinja::Template program;
  std::string name;
  // What the template writes after an assistant's content, and before it
  // (the generation prompt), found by rendering a probe conversation.
  std::string assistant_suffix;
};

namespace {

// OpenAI clients send a tool call's arguments as a JSON string; templates
// index and print them as an object (vLLM and llama.cpp pass them so too).
void parse_arguments(json::value& calls) {
  if (!calls.is_array()) return;
  for (json::value& call : calls.as_array()) {
    if (!call.is_object()) continue;
    json::value* function = call.as_object().if_contains("function");
    if (function == nullptr || !function->is_object()) continue;
    json::value* arguments = function->as_object().if_contains("arguments");
    if (arguments == nullptr || !arguments->is_string()) continue;
    boost::system::error_code ec;
    json::value parsed = json::parse(arguments->as_string(), ec);
    if (!ec && parsed.is_object()) *arguments = std::move(parsed);
  }
}

Result<jinja::Value> client_json(std::string_view text, std::string_view what, bool arguments) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return fail(std::string(what) + " is not valid JSON: " + ec.message());
  if (arguments) parse_arguments(v);
  return jinja::from_json(v, true);
}

Result<jinja::Object> context_of(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                 const ChatExtras& extras, const ChatSpecialTexts& special) {
  jinja::Array list;
  for (const ChatMessage& m : messages) {
    jinja::Object o;
    // The roles a template knows are its own words (a header it writes, the
    // same as its generation prompt); any other is the client's text.
    const bool known = m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "tool";
    o.set("role", known ? jinja::Value::markup(m.role) : jinja::Value::client(m.role));
    // An assistant message that only calls tools has content null in the
    // OpenAI API; templates test for it.
    o.set("content", m.content.empty() && !m.tool_calls.empty() ? jinja::Value::none()
                                                                : jinja::Value::client(m.content));
    if (!m.tool_calls.empty()) {
      auto calls = client_json(m.tool_calls, "a message's tool_calls", true);
      if (!calls) return calls.error();
      o.set("tool_calls", std::move(*calls));
    }
    if (!m.tool_call_id.empty()) o.set("tool_call_id", jinja::Value::client(m.tool_call_id));
    if (!m.name.empty()) o.set("name", jinja::Value::client(m.name));
    list.push_back(jinja::Value::object(std::move(o)));
  }
  jinja::Object context;
  context.set("messages", jinja::Value::array(std::move(list)));
  context.set("bos_token", jinja::Value::markup(special.bos));
  context.set("eos_token", jinja::Value::markup(special.eos));
  context.set("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
  if (!extras.tools.empty()) {
    auto tools = client_json(extras.tools, "tools", false);
    if (!tools) return tools.error();
    context.set("tools", std::move(*tools));
  }
  if (!extras.tool_choice.empty()) {
    auto choice = client_json(extras.tool_choice, "tool_choice", false);
    if (!choice) return choice.error();
    context.set("tool_choice", std::move(*choice));
  }
  std::tm now{};
  const std::time_t seconds = std::time(nullptr);
  localtime_r(&seconds, &now);
  context.set("strftime_now", jinja::strftime_now_at(now));
  return context;
}

std::vector<ChatSegment> segments_of(const jinja::Text& text) {
  std::vector<ChatSegment> out;
  for (const jinja::TextRun& run : jinja::runs_of(text)) {
    if (run.bytes.empty()) continue;
    if (!out.empty() && out.back().markup == !run.client) {
      out.back().text += run.bytes;
    } else {
      out.push_back({std::string(run.bytes), !run.client});
    }
  }
  return out;
}

// The segments of `segments` past their first `skip` bytes.
std::vector<ChatSegment> drop_prefix(std::vector<ChatSegment> segments, std::size_t skip) {
  std::vector<ChatSegment> out;
  for (ChatSegment& s : segments) {
    if (skip >= s.text.size()) {
      skip -= s.text.size();
      continue;
    }
    s.text.erase(0, skip);
    skip = 0;
    out.push_back(std::move(s));
  }
  return out;
}

Result<jinja::Text> render_text(const jinja::Template& program, std::span<const ChatMessage> messages,
                                bool add_generation_prompt, const ChatExtras& extras,
                                const ChatSpecialTexts& special, std::string_view name) {
  auto context = context_of(messages, add_generation_prompt, extras, special);
  if (!context) return context.error();
  auto text = program.render(*context);
  if (!text) return fail("chat template (" + std::string(name) + "): " + text.error().message);
  return text;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::from_jinja(std::string_view source, ChatSpecialTexts special,
                                              std::string name) {
  auto program = jinja::Template::parse(source);
  if (!program) return fail("chat template (" + name + "): " + program.error().message);
  // The suffix: what the template writes after an assistant's content, found
  // by rendering probe conversations: the reply last, and the reply followed
  // by a question (what the next turn's full render will have there).
  constexpr std::string_view question = "PensieveProbeQuestion", reply = "PensieveProbeReply";
  const std::vector<ChatMessage> asked = {{"user", std::string(question)}};
  std::vector<ChatMessage> answered = asked;
  answered.push_back({"assistant", std::string(reply)});
  std::vector<ChatMessage> followed = answered;
  followed.push_back({"user", "PensieveProbeFollowUp"});
  auto open = render_text(*program, asked, true, {}, special, name);
  auto closed = render_text(*program, answered, false, {}, special, name);
  auto next = render_text(*program, followed, true, {}, special, name);
  std::string suffix = special.eos;  // where the probes say nothing better
  // What follows the reply in `text`, or nullopt.
  auto after_reply = [&](const Result<jinja::Text>& text) -> std::optional<std::string> {
    if (!open || !text || !text->bytes.starts_with(open->bytes)) return std::nullopt;
    const std::size_t at = text->bytes.find(reply, open->bytes.size());
    if (at == std::string::npos) return std::nullopt;
    return text->bytes.substr(at + reply.size());
  };
  const auto at_end = after_reply(closed);
  const auto in_middle = after_reply(next);
  if (at_end) {
    suffix = *at_end;
    // Phi-3 ends the whole conversation with EOS: not part of a turn's end.
    const std::string& eos = special.eos;
    if (in_middle && !in_middle->starts_with(suffix) && !eos.empty() && suffix.ends_with(eos) &&
        in_middle->starts_with(suffix.substr(0, suffix.size() - eos.size()))) {
      suffix.resize(suffix.size() - eos.size());
    }
    // Any other difference: the next turn finds the held text is not a
    // prefix of its render and encodes the conversation again (correct,
    // only slower).
  }
  ChatTemplate t(ChatFamily::chatml, std::move(special));
  t.jinja_ = std::make_shared<const Jinja>(Jinja{std::move(*program), std::move(name), std::move(suffix)});
  return t;
}

std::string_view ChatTemplate::jinja_name() const { return jinja_->name; }
std::string ChatTemplate::jinja_suffix() const { return jinja_->assistant_suffix; }

Result<std::vector<ChatSegment>> ChatTemplate::jinja_segments(std::span<const ChatMessage> messages,
                                                              bool add_generation_prompt,
                                                              const ChatExtras& extras) const {
  auto text = render_text(jinja_->program, messages, add_generation_prompt, extras, special_, jinja_->name);
  if (!text) return text.error();
  return segments_of(*text);
}

Result<ChatContinuation> ChatTemplate::continuation(std::span<const ChatMessage> messages, std::size_t first,
                                                    std::string_view held, bool add_generation_prompt,
                                                    const ChatExtras& extras) const {
  if (first > messages.size()) {
    return fail("chat template: continuation from message " + std::to_string(first) + " of " +
                std::to_string(messages.size()));
  }
  ChatContinuation out;
  if (!jinja_) {
    bool tool_fields = !extras.empty();
    for (const ChatMessage& m : messages) tool_fields = tool_fields || m.has_tool_fields();
    if (tool_fields) {
      return fail("the built-in chat template '" + std::string(name()) +
                  "' does not render tools or tool calls; serve a model whose own template does, or "
                  "choose one with --chat-template FILE");
    }
    auto segments = render_segments(messages, first, add_generation_prompt);
    if (!segments) return segments.error();
    out.segments = std::move(*segments);
    return out;
  }
  auto whole = jinja_segments(messages, add_generation_prompt, extras);
  if (!whole) return whole.error();
  out.text = chat_text(*whole);
  std::string before(held);
  if (before.empty() && first > 0) {
    auto earlier = jinja_segments(messages.first(first), false, extras);
    if (!earlier) return earlier.error();
    before = chat_text(*earlier);
  }
  if (out.text.starts_with(before)) {
    out.segments = drop_prefix(std::move(*whole), before.size());
  } else {
    out.segments = std::move(*whole);
    out.restart = true;
  }
  return out;
}

}  // namespace pensieve::model
