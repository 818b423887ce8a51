// Chat templates: recognising a model's family from its Jinja source, the
// name override, the default, and the error for templates we do not know.
#include "gpu/model/builtin_vocab.hpp"
#include "gpu/text/chat_template.hpp"
#include "gpu/text/tokenizer.hpp"

#include <catch2/catch.hpp>

using namespace pensieve::model;

namespace {

// Abridged from the templates the model families ship.
constexpr std::string_view llama2_jinja =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}"
    "{% endif %}{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
constexpr std::string_view mistral_jinja =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ message['content'] + eos_token}}{% endif %}{% endfor %}";
constexpr std::string_view llama3_jinja =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
constexpr std::string_view qwen2_jinja =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
constexpr std::string_view zephyr_jinja =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + "
    "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\\n' + "
    "message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\\n'  + "
    "message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n"
    "{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";
constexpr std::string_view gemma_jinja =
    "{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' + message['content'] | trim "
    "+ '<end_of_turn>\\n' }}{% endfor %}";

ChatFamily detected(std::string_view jinja) { return detect_chat_template(jinja).value().family(); }

}  // namespace

TEST_CASE("each family is recognised from its Jinja source") {
  CHECK(detected(llama2_jinja) == ChatFamily::llama2);
  CHECK(detected(mistral_jinja) == ChatFamily::mistral);
  CHECK(detected(llama3_jinja) == ChatFamily::llama3);
  CHECK(detected(qwen2_jinja) == ChatFamily::chatml);
  CHECK(detected(zephyr_jinja) == ChatFamily::zephyr);
}

TEST_CASE("a Qwen template's built-in system prompt is used when the conversation has none") {
  const auto tmpl = detect_chat_template(qwen2_jinja).value();
  const std::vector<ChatMessage> user_only = {{"user", "Hi"}};
  CHECK(tmpl.render(user_only, true).value() ==
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n");
  const std::vector<ChatMessage> with_system = {{"system", "S"}, {"user", "Hi"}};
  CHECK(tmpl.render(with_system, false).value() ==
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST_CASE("a template of an unknown family is a clear error") {
  const auto result = detect_chat_template(gemma_jinja);
  REQUIRE_FALSE(result.has_value());
  CHECK_THAT(result.error().message, Catch::Contains("--chat-template"));
}

TEST_CASE("a model without a template gets chatml") {
  CHECK(detected("") == ChatFamily::chatml);
  CHECK(default_chat_template().name() == "chatml");
}

TEST_CASE("a template can be chosen by name, and unknown names are refused") {
  for (std::string_view name : chat_template_names()) {
    CHECK(find_chat_template(name).value().name() == name);
  }
  const auto unknown = find_chat_template("vicuna");
  REQUIRE_FALSE(unknown.has_value());
  CHECK_THAT(unknown.error().message, Catch::Contains("llama2"));
}

TEST_CASE("the tokenizer's template and special texts are used unless a name overrides them") {
  const auto tokenizer = Tokenizer::from_data(builtin_vocab()).value();
  const auto from_model = chat_template_for(tokenizer).value();
  CHECK(from_model.family() == ChatFamily::chatml);
  const auto overridden = chat_template_for(tokenizer, "llama2").value();
  CHECK(overridden.family() == ChatFamily::llama2);
  const std::vector<ChatMessage> turns = {{"user", "a"}, {"assistant", "b"}, {"user", "c"}};
  CHECK(overridden.render(turns, true).value() == "[INST] a [/INST] b </s><s>[INST] c [/INST]");
  CHECK_FALSE(chat_template_for(tokenizer, "nope").has_value());
}

TEST_CASE("a rendered chatml prompt tokenizes its markers as control tokens") {
  const auto tokenizer = Tokenizer::from_data(builtin_vocab()).value();
  const auto tmpl = chat_template_for(tokenizer).value();
  const std::vector<ChatMessage> turns = {{"user", "hi"}};
  const auto ids = tokenizer.encode(tmpl.render(turns, true).value(), true, true);
  REQUIRE(ids.size() > 3);
  CHECK(ids[0] == 1);  // BOS
  CHECK(ids[1] == 3);  // <|im_start|>
  CHECK(std::count(ids.begin(), ids.end(), 4) == 1);  // <|im_end|>
  CHECK(tokenizer.decode(ids, DecodeOptions{.render_special = true}) ==
        "<s><|im_start|> user\nhi<|im_end|> \n<|im_start|> assistant\n");
}
