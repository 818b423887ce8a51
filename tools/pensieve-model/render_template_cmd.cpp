// pensieve-model render-template: renders a Jinja chat template with
// Pensieve's interpreter, for people checking a model's template and for the
// oracle test (tests/gpu/chat_templates/oracle.mjs) that compares it with
// @huggingface/jinja.
//   render-template TEMPLATE.jinja CONTEXT.json    the text, to stdout
//   render-template --batch CASES.json             [{"text": ...} | {"error": ...}, ...] for
//                                                  {"cases": [{"template": PATH, "context":
//                                                  {...}}],
//                                                   "now": [Y, M, D, h, m]} (strftime_now's clock)
#include "gpu/text/jinja/json_value.hpp"
#include "gpu/text/jinja/strftime.hpp"
#include "gpu/text/jinja/template.hpp"
#include "tools/pensieve-model/commands.hpp"

#include <boost/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

namespace pensieve::tools {

namespace jinja = text::jinja;

namespace {

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

// The clock strftime_now reads: fixed by the batch file, else the present.
std::tm clock_of(const boost::json::value* now) {
  std::tm t{};
  if (now != nullptr && now->is_array() && now->as_array().size() == 5) {
    const auto& a = now->as_array();
    t.tm_year = int(a[0].to_number<std::int64_t>()) - 1900;
    t.tm_mon = int(a[1].to_number<std::int64_t>()) - 1;
    t.tm_mday = int(a[2].to_number<std::int64_t>());
    t.tm_hour = int(a[3].to_number<std::int64_t>());
    t.tm_min = int(a[4].to_number<std::int64_t>());
    return t;
  }
  const std::time_t s = std::time(nullptr);
  localtime_r(&s, &t);
  return t;
}

jinja::Object context_of(const boost::json::value& v, const std::tm& now) {
  const jinja::Value value = jinja::from_json(v, true);
  jinja::Object context = value.is(jinja::Kind::object) ? value.fields() : jinja::Object{};
  if (context.find("strftime_now") == nullptr)
    context.set("strftime_now", jinja::strftime_now_at(now));
  return context;
}

// Rendering with a context's strings as client text changes no byte.
Result<std::string> render(const jinja::Template& t, const boost::json::value& context,
                           const std::tm& now) {
  auto text = t.render(context_of(context, now));
  if (!text) return text.error();
  return Result<std::string>(boost::system::in_place_value, std::move(text->bytes));
}

int batch(const std::string& cases_path) {
  std::string cases_text;
  if (!read_file(cases_path, cases_text)) {
    std::fprintf(stderr, "render-template: cannot read %s\n", cases_path.c_str());
    return 1;
  }
  boost::system::error_code ec;
  const boost::json::value cases = boost::json::parse(cases_text, ec);
  if (ec || !cases.is_object() || !cases.as_object().contains("cases")) {
    std::fprintf(stderr, "render-template: %s is not {\"cases\": [...]}\n", cases_path.c_str());
    return 1;
  }
  const std::tm now = clock_of(cases.as_object().if_contains("now"));
  std::map<std::string, Result<jinja::Template>> parsed;
  boost::json::array results;
  for (const auto& c : cases.at("cases").as_array()) {
    const std::string path(c.at("template").as_string());
    auto it = parsed.find(path);
    if (it == parsed.end()) {
      std::string source;
      if (!read_file(path, source)) {
        std::fprintf(stderr, "render-template: cannot read %s\n", path.c_str());
        return 1;
      }
      it = parsed.emplace(path, jinja::Template::parse(source)).first;
    }
    boost::json::object r;
    if (!it->second) {
      r["error"] = it->second.error().message;
    } else if (auto text = render(*it->second, c.at("context"), now); text) {
      r["text"] = *text;
    } else {
      r["error"] = text.error().message;
    }
    results.push_back(std::move(r));
  }
  std::cout << boost::json::serialize(results) << "\n";
  return 0;
}

}  // namespace

int cmd_render_template(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--batch") return batch(argv[2]);
  if (argc != 3) {
    std::fprintf(stderr,
                 "usage: render-template TEMPLATE.jinja CONTEXT.json | render-template --batch "
                 "CASES.json\n");
    return 2;
  }
  std::string source, context_text;
  if (!read_file(argv[1], source) || !read_file(argv[2], context_text)) {
    std::fprintf(stderr, "render-template: cannot read %s or %s\n", argv[1], argv[2]);
    return 1;
  }
  boost::system::error_code ec;
  const boost::json::value context = boost::json::parse(context_text, ec);
  if (ec) {
    std::fprintf(stderr, "render-template: %s is not JSON: %s\n", argv[2], ec.message().c_str());
    return 1;
  }
  auto t = jinja::Template::parse(source);
  if (!t) {
    std::fprintf(stderr, "render-template: %s: %s\n", argv[1], t.error().message.c_str());
    return 1;
  }
  auto text = render(*t, context, clock_of(nullptr));
  if (!text) {
    std::fprintf(stderr, "render-template: %s: %s\n", argv[1], text.error().message.c_str());
    return 1;
  }
  std::fwrite(text->data(), 1, text->size(), stdout);
  return 0;
}

}  // namespace pensieve::tools
