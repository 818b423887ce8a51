#include "gpu/text/jinja/template.hpp"

#include "gpu/text/jinja/parser.hpp"

namespace pensieve::text::jinja {

Result<Template> Template::parse(std::string_view source) {
  auto root = parse_template(source);
  if (!root) return root.error();
  return Template(std::shared_ptr<const Node>(std::move(*root)));
}

Result<Text> Template::render(const Object& context, const RenderLimits& limits) const {
  Interpreter in(limits);
  try {
    return in.run(*root_, context);
  } catch (const RenderError& e) {
    return fail(located(e.at, e.what));
  }
}

}  // namespace pensieve::text::jinja
