#include "tools/pensieve-trace/cli.hpp"

#include "tools/pensieve-trace/export_chrome.hpp"
#include "tools/pensieve-trace/render_svg.hpp"
#include "tools/pensieve-trace/summary.hpp"

#include <boost/json/serialize.hpp>

#include <charconv>
#include <fstream>
#include <map>
#include <optional>

namespace pensieve::tools::trace {
namespace {

constexpr const char* usage_text =
    "usage:\n"
    "  pensieve-trace export FILE -o OUT.json         Chrome / Perfetto trace-event JSON\n"
    "  pensieve-trace summary FILE [--json] [--top N] busy / idle per actor, streams, swap overlap,\n"
    "                                                  the N slowest requests by phase (default 5)\n"
    "  pensieve-trace render FILE -o OUT.svg [--from-ms A] [--to-ms B] [--width PX] [--requests N]\n"
    "                                                  an SVG timeline of a window (ms since the first span)\n"
    "                                                  with the phases of up to N requests (default 8)\n";

constexpr int exit_bad_input = 1;
constexpr int exit_usage = 2;

// FILE plus --flag [value] pairs; `switches` take no value.
struct Parsed {
  std::string file;
  std::map<std::string, std::string> flags;
};

std::optional<Parsed> parse(const std::vector<std::string>& args, const std::vector<std::string>& valued,
                            const std::vector<std::string>& switches, std::ostream& err) {
  Parsed p;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (std::find(switches.begin(), switches.end(), a) != switches.end()) {
      p.flags[a] = "";
    } else if (std::find(valued.begin(), valued.end(), a) != valued.end()) {
      if (i + 1 == args.size()) {
        err << "pensieve-trace: " << a << " needs a value\n";
        return std::nullopt;
      }
      p.flags[a] = args[++i];
    } else if (!a.empty() && a[0] == '-') {
      err << "pensieve-trace " << args[0] << ": unknown option " << a << "\n";
      return std::nullopt;
    } else if (p.file.empty()) {
      p.file = a;
    } else {
      err << "pensieve-trace " << args[0] << ": one trace file only (got " << p.file << " and " << a << ")\n";
      return std::nullopt;
    }
  }
  if (p.file.empty()) {
    err << "pensieve-trace " << args[0] << ": which trace file?\n";
    return std::nullopt;
  }
  return p;
}

template <class T>
std::optional<T> number(const std::string& text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool write_file(const std::string& path, const std::string& text, std::ostream& err) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) {
    err << "pensieve-trace: cannot write " << path << "\n";
    return false;
  }
  return true;
}

int cmd_export(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto p = parse(args, {"-o"}, {}, err);
  if (!p) return exit_usage;
  if (!p->flags.contains("-o")) {
    err << "pensieve-trace export: give the output file with -o OUT.json\n";
    return exit_usage;
  }
  auto trace = load_trace(p->file);
  if (!trace) {
    err << "pensieve-trace: " << trace.error().message << "\n";
    return exit_bad_input;
  }
  if (!write_file(p->flags["-o"], boost::json::serialize(chrome_trace_json(*trace)), err)) return exit_bad_input;
  out << "wrote " << p->flags["-o"] << ": " << trace->spans.size() << " spans on " << trace->lanes.size()
      << " tracks\n";
  return 0;
}

int cmd_summary(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto p = parse(args, {"--top"}, {"--json"}, err);
  if (!p) return exit_usage;
  std::size_t top = 5;
  if (p->flags.contains("--top")) {
    const auto n = number<std::size_t>(p->flags["--top"]);
    if (!n) {
      err << "pensieve-trace summary: --top takes a count, not '" << p->flags["--top"] << "'\n";
      return exit_usage;
    }
    top = *n;
  }
  auto trace = load_trace(p->file);
  if (!trace) {
    err << "pensieve-trace: " << trace.error().message << "\n";
    return exit_bad_input;
  }
  const Summary summary = summarize(*trace, top);
  if (p->flags.contains("--json")) {
    out << boost::json::serialize(summary_json(summary)) << "\n";
  } else {
    out << summary_text(summary);
  }
  return 0;
}

int cmd_render(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto p = parse(args, {"-o", "--from-ms", "--to-ms", "--width", "--requests"}, {}, err);
  if (!p) return exit_usage;
  if (!p->flags.contains("-o")) {
    err << "pensieve-trace render: give the output file with -o OUT.svg\n";
    return exit_usage;
  }
  RenderOptions options;
  for (const auto& [flag, field] : {std::pair{"--from-ms", &options.from_ms}, std::pair{"--to-ms", &options.to_ms}}) {
    if (!p->flags.contains(flag)) continue;
    const auto v = number<double>(p->flags[flag]);
    if (!v) {
      err << "pensieve-trace render: " << flag << " takes milliseconds, not '" << p->flags[flag] << "'\n";
      return exit_usage;
    }
    *field = *v;
  }
  for (const auto& [flag, field] : {std::pair{"--width", &options.width_px}, std::pair{"--requests", &options.request_rows}}) {
    if (!p->flags.contains(flag)) continue;
    const auto v = number<int>(p->flags[flag]);
    if (!v || *v < 0) {
      err << "pensieve-trace render: " << flag << " takes a whole number, not '" << p->flags[flag] << "'\n";
      return exit_usage;
    }
    *field = *v;
  }
  auto trace = load_trace(p->file);
  if (!trace) {
    err << "pensieve-trace: " << trace.error().message << "\n";
    return exit_bad_input;
  }
  auto svg = render_svg(*trace, options);
  if (!svg) {
    err << "pensieve-trace: " << svg.error().message << "\n";
    return exit_bad_input;
  }
  if (!write_file(p->flags["-o"], *svg, err)) return exit_bad_input;
  out << "wrote " << p->flags["-o"] << ": " << trace->lanes.size() << " lanes\n";
  return 0;
}

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? err : out) << usage_text;
    return args.empty() ? exit_usage : 0;
  }
  try {
    if (args[0] == "export") return cmd_export(args, out, err);
    if (args[0] == "summary") return cmd_summary(args, out, err);
    if (args[0] == "render") return cmd_render(args, out, err);
  } catch (const std::bad_alloc&) {
    err << "pensieve-trace: out of memory (is this a trace file?)\n";
    return exit_bad_input;
  } catch (const std::exception& e) {
    err << "pensieve-trace: " << e.what() << "\n";
    return exit_bad_input;
  }
  err << "pensieve-trace: unknown command '" << args[0] << "'\n" << usage_text;
  return exit_usage;
}

}  // namespace pensieve::tools::trace
