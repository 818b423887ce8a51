#include "bench/pensieve-bench/dataset.hpp"

#include <boost/json.hpp>

#include <fstream>
#include <sstream>

namespace pensieve::bench {

namespace json = boost::json;

namespace {

Result<Conversation> parse_line(std::string_view line) {
  boost::system::error_code ec;
  const json::value doc = json::parse(line, ec);
  if (ec) return fail("not valid JSON (" + ec.message() + ")");
  const json::object* o = doc.if_object();
  if (!o) return fail("a line must be a JSON object");
  Conversation c;
  const json::value* id = o->if_contains("id");
  if (!id || !id->is_string()) return fail("'id' is missing or not a string");
  c.id = std::string(id->get_string());
  const json::value* turns = o->if_contains("turns");
  if (!turns || !turns->is_array() || turns->get_array().empty()) {
    return fail("'turns' is missing or not a non-empty array");
  }
  bool has_user = false;
  for (std::size_t i = 0; i < turns->get_array().size(); ++i) {
    const json::object* t = turns->get_array()[i].if_object();
    const json::value* role = t ? t->if_contains("role") : nullptr;
    const json::value* content = t ? t->if_contains("content") : nullptr;
    const std::string where = "turns[" + std::to_string(i) + "]";
    if (!role || !role->is_string() || !content || !content->is_string()) {
      return fail(where + " must be {\"role\": string, \"content\": string}");
    }
    const std::string r(role->get_string());
    if (r != "user" && r != "assistant" && r != "system") {
      return fail(where + ".role '" + r + "' is not user, assistant or system");
    }
    has_user = has_user || r == "user";
    c.turns.push_back({r, std::string(content->get_string())});
  }
  if (!has_user) return fail("the conversation has no user message");
  return c;
}

}  // namespace

Result<std::vector<Conversation>> parse_dataset(std::string_view text, const std::string& source) {
  std::vector<Conversation> out;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto c = parse_line(line);
    if (!c) return fail(source + ":" + std::to_string(line_no) + ": " + c.error().message);
    out.push_back(std::move(*c));
  }
  if (out.empty()) return fail(source + ": no conversations");
  return out;
}

Result<std::vector<Conversation>> load_dataset(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_dataset(text.str(), path);
}

std::size_t utf8_chars(std::string_view text) {
  std::size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace pensieve::bench
