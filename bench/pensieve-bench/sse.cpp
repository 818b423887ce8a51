#include "bench/pensieve-bench/sse.hpp"

#include <boost/json.hpp>

namespace pensieve::bench {

namespace json = boost::json;

std::vector<std::string> SseParser::feed(std::string_view bytes) {
  std::vector<std::string> events;
  while (!bytes.empty()) {
    const std::size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      partial_line_.append(bytes);
      break;
    }
    partial_line_.append(bytes.substr(0, nl));
    bytes.remove_prefix(nl + 1);
    std::string line = std::move(partial_line_);
    partial_line_.clear();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    take_line(line, events);
  }
  return events;
}

void SseParser::take_line(std::string_view line, std::vector<std::string>& events) {
  if (line.empty()) {
    if (has_data_) events.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // comment (keep-alive)
  const std::size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  if (field != "data") return;
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
}

namespace {

std::int64_t int_field(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v) return 0;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return std::int64_t(v->get_uint64());
  if (v->is_double()) return std::int64_t(v->get_double());
  return 0;
}

StreamUsage read_usage(const json::object& u) {
  StreamUsage out;
  out.prompt_tokens = int_field(u, "prompt_tokens");
  out.completion_tokens = int_field(u, "completion_tokens");
  if (const json::value* d = u.if_contains("prompt_tokens_details"); d && d->is_object()) {
    out.cached_tokens = int_field(d->get_object(), "cached_tokens");
  }
  return out;
}

}  // namespace

void StreamRecorder::on_event(std::string_view data, double t_s) {
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  boost::system::error_code ec;
  const json::value doc = json::parse(data, ec);
  const json::object* o = ec ? nullptr : doc.if_object();
  if (!o) {
    if (error_.empty()) error_ = "malformed stream event: " + std::string(data.substr(0, 200));
    return;
  }
  if (const json::value* e = o->if_contains("error")) {
    const json::value* m = e->is_object() ? e->get_object().if_contains("message") : nullptr;
    if (error_.empty()) error_ = m && m->is_string() ? std::string(m->get_string()) : json::serialize(*e);
    return;
  }
  if (const json::value* u = o->if_contains("usage"); u && u->is_object()) usage_ = read_usage(u->get_object());
  const json::value* choices = o->if_contains("choices");
  if (!choices || !choices->is_array() || choices->get_array().empty()) return;
  const json::object* choice = choices->get_array()[0].if_object();
  if (!choice) return;
  if (const json::value* f = choice->if_contains("finish_reason"); f && f->is_string()) {
    finish_reason_ = std::string(f->get_string());
  }
  const json::value* delta = choice->if_contains("delta");
  const json::value* content = delta && delta->is_object() ? delta->get_object().if_contains("content") : nullptr;
  if (!content || !content->is_string() || content->get_string().empty()) return;
  text_.append(content->get_string());
  ++content_events_;
  if (!first_token_s_) {
    first_token_s_ = t_s;
  } else {
    inter_token_s_.push_back(t_s - last_token_s_);
  }
  last_token_s_ = t_s;
}

}  // namespace pensieve::bench
