#include "bench/pensieve-bench/report.hpp"

#include <boost/json.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>

namespace pensieve::bench {

namespace json = boost::json;

std::string run_file_name(const std::string& label, const LoadSpec& load) {
  if (load.rate_per_s) return label + "-rate" + format_number(*load.rate_per_s) + ".json";
  return label + "-concurrency" + std::to_string(load.concurrency.value_or(0)) + ".json";
}

std::string utc_timestamp_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {

json::value opt(const std::optional<double>& v, double scale) {
  return v ? json::value(*v * scale) : json::value(nullptr);
}

// Percentiles in the given unit: scale 1000 with suffix "_ms" turns seconds into ms.
json::object dist_json(const Distribution& d, double scale, const std::string& suffix) {
  json::object o;
  o["count"] = d.count;
  o["mean" + suffix] = opt(d.mean, scale);
  o["p50" + suffix] = opt(d.p50, scale);
  o["p90" + suffix] = opt(d.p90, scale);
  o["p99" + suffix] = opt(d.p99, scale);
  o["max" + suffix] = opt(d.max, scale);
  return o;
}

json::object load_json(const LoadSpec& load) {
  json::object o;
  if (load.rate_per_s) {
    o["kind"] = "poisson";
    o["rate_conversations_per_s"] = *load.rate_per_s;
  } else {
    o["kind"] = "concurrency";
    o["concurrency"] = load.concurrency.value_or(0);
  }
  return o;
}

json::object workload_json(const RunReport& r) {
  const BenchOptions& o = *r.options;
  return {{"data", o.data_path},
          {"conversations", r.workload_conversations},
          {"requests_planned", r.workload_requests},
          {"client_mode", r.target->mode.value_or(o.mode) == ClientMode::stateful ? "stateful" : "stateless"},
          {"conversation_field", conversation_field},
          {"think_time_mean_s", o.think_time_s},
          {"max_tokens_cap", o.max_tokens},
          {"seed", o.seed},
          {"duration_limit_s", o.duration_s}};
}

json::array requests_json(const std::vector<RequestRecord>& records) {
  json::array out;
  for (const RequestRecord& q : records) {
    json::object o{{"conversation", q.conversation},
                   {"turn", q.turn},
                   {"start_s", q.start_s},
                   {"ttft_ms", opt(q.ttft_s, 1000.0)},
                   {"e2e_ms", q.e2e_s * 1000.0},
                   {"max_tokens", q.max_tokens},
                   {"prompt_tokens", q.prompt_tokens},
                   {"completion_tokens", q.completion_tokens},
                   {"cached_tokens", q.cached_tokens},
                   {"usage_reported", q.usage_reported}};
    if (!q.error.empty()) o["error"] = q.error;
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

std::string format_run_json(const RunReport& r) {
  const RunSummary& s = r.summary;
  json::object doc;
  doc["tool"] = "pensieve-bench";
  doc["command_line"] = r.options->command_line;
  doc["timestamp"] = r.timestamp_utc;
  doc["target"] = json::object{{"label", r.target->label}, {"url", r.target->url}, {"model", r.model}};
  doc["load"] = load_json(r.load);
  doc["workload"] = workload_json(r);
  doc["slo"] = json::object{{"ttft_ms", r.options->slo.ttft_ms}, {"tpot_ms", r.options->slo.tpot_ms}};
  doc["duration_s"] = s.duration_s;
  doc["conversations_started"] = r.records->conversations_started;
  doc["requests"] = json::object{{"completed", s.requests}, {"errors", s.errors}, {"within_slo", s.good_requests}};
  doc["throughput"] = json::object{{"requests_per_s", s.requests_per_s},
                                   {"output_tokens_per_s", s.output_tokens_per_s},
                                   {"goodput_requests_per_s", s.goodput_requests_per_s}};
  doc["tokens"] = json::object{{"prompt", s.prompt_tokens},
                               {"completion", s.completion_tokens},
                               {"cached", s.cached_tokens},
                               {"cached_fraction_of_prompt",
                                s.prompt_tokens > 0 ? double(s.cached_tokens) / double(s.prompt_tokens) : 0.0}};
  doc["ttft"] = dist_json(s.ttft_s, 1000.0, "_ms");
  doc["itl"] = dist_json(s.inter_token_s, 1000.0, "_ms");
  doc["tpot"] = dist_json(s.tpot_s, 1000.0, "_ms");
  doc["e2e_latency"] = dist_json(s.e2e_s, 1000.0, "_ms");
  doc["normalized_latency"] = dist_json(s.normalized_s_per_token, 1.0, "_s_per_token");
  json::array examples;
  for (const auto& e : s.error_examples) examples.push_back(json::string(e));
  doc["errors"] = json::object{{"count", s.errors}, {"examples", std::move(examples)}};
  doc["per_request"] = requests_json(r.records->requests);
  return json::serialize(doc) + "\n";
}

std::string format_run_line(const RunReport& r) {
  const RunSummary& s = r.summary;
  auto ms = [](const std::optional<double>& v) { return v ? *v * 1000.0 : -1.0; };
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%-20s %-16s req/s %7.3f  out tok/s %8.1f  TTFT p50/p90/p99 ms %8.1f %8.1f %8.1f  "
                "ITL p50/p99 ms %7.1f %7.1f  norm s/tok mean %.4f  goodput %.3f  errors %zu",
                r.target->label.c_str(),
                (r.load.rate_per_s ? "rate " + format_number(*r.load.rate_per_s)
                                   : "conc " + std::to_string(r.load.concurrency.value_or(0)))
                    .c_str(),
                s.requests_per_s, s.output_tokens_per_s, ms(s.ttft_s.p50), ms(s.ttft_s.p90), ms(s.ttft_s.p99),
                ms(s.inter_token_s.p50), ms(s.inter_token_s.p99), s.normalized_s_per_token.mean.value_or(-1.0),
                s.goodput_requests_per_s, s.errors);
  return buf;
}

}  // namespace pensieve::bench
