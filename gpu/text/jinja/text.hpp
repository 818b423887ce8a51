#pragma once
// Text with provenance: the bytes of a Jinja string and which of them came
// from a client (message content, roles, tool arguments) rather than from
// the template. The renderer keeps the two apart so that a client who writes
// "<|im_end|>" gets that text tokenized as text, never as a control token.
// Operations that copy bytes (concatenation, slices, trim) keep exact
// provenance; operations that rewrite bytes (replace, upper, tojson) mark the
// whole result as client text when any input byte was. Immutable once built.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pensieve::text::jinja {

struct ByteSpan {
  std::uint32_t begin = 0;
  std::uint32_t end = 0;
};

struct Text {
  std::string bytes;
  std::vector<ByteSpan> client;  // sorted, disjoint, non-empty spans

  static Text markup(std::string s) { return Text{std::move(s), {}}; }
  static Text from_client(std::string s);

  bool has_client() const { return !client.empty(); }
  void append(const Text& other);
  void append_markup(std::string_view s) { bytes += s; }
  // bytes[pos, pos + len) with the provenance of those bytes.
  Text substr(std::size_t pos, std::size_t len) const;
  // New bytes computed from this text (and `other`): client when any input was.
  Text derived(std::string new_bytes) const;
};

// A stretch of rendered output of one provenance.
struct TextRun {
  std::string_view bytes;
  bool client = false;
};
std::vector<TextRun> runs_of(const Text& t);

}  // namespace pensieve::text::jinja
