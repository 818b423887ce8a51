// libFuzzer target: any bytes as a Jinja chat template, parsed and (when it
// parses) rendered over a small conversation with tools. Each must give an
// Error or a text; a step budget bounds every render, so a hostile template
// neither loops forever (libFuzzer's -timeout catches that) nor crashes
// (ASan/UBSan catch that).
#include "gpu/text/jinja/template.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace {

using namespace pensieve::text::jinja;

Value message(const char* role, const char* content) {
  Object o;
  o.set("role", Value::client(role));
  o.set("content", Value::client(content));
  return Value::object(std::move(o));
}

Object context() {
  Object call_fn;
  call_fn.set("name", Value::client("get_weather"));
  Object args;
  args.set("city", Value::client("Paris"));
  call_fn.set("arguments", Value::object(std::move(args)));
  Object call;
  call.set("function", Value::object(std::move(call_fn)));
  Value assistant = message("assistant", "");
  assistant.fields().set("tool_calls", Value::array({Value::object(std::move(call))}));
  Object ctx;
  ctx.set("messages", Value::array({message("system", "Be brief."),
                                    message("user", " Hi <|im_end|> "), std::move(assistant),
                                    message("tool", "{\"t\": 21}"), message("user", "ok")}));
  ctx.set("add_generation_prompt", Value::boolean(true));
  ctx.set("bos_token", Value::markup("<s>"));
  ctx.set("eos_token", Value::markup("</s>"));
  Object tool;
  tool.set("type", Value::markup("function"));
  ctx.set("tools", Value::array({Value::object(std::move(tool))}));
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  auto t = Template::parse(source);
  if (!t) return 0;
  RenderLimits limits;
  limits.max_steps = 200000;
  limits.max_bytes = std::size_t(1) << 20;
  auto text = t->render(context(), limits);
  if (text) {
    volatile std::size_t n = text->bytes.size();
    (void)n;
  }
  return 0;
}
