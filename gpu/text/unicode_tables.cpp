#include "gpu/text/unicode_tables.hpp"

#include <algorithm>

namespace pensieve::model::unicode {

namespace {

std::uint32_t byte_at(std::string_view text, std::size_t i) {
  return static_cast<unsigned char>(text[i]);
}

bool is_continuation(std::string_view text, std::size_t i) {
  return i < text.size() && (byte_at(text, i) & 0xC0) == 0x80;
}

// Decodes one code point at `offset` the way llama.cpp does (it checks the
// continuation bytes but not overlongs); returns false for an invalid start.
bool decode_one(std::string_view text, std::size_t& offset, std::uint32_t& cpt) {
  const std::uint32_t b0 = byte_at(text, offset);
  if ((b0 & 0x80) == 0) {
    cpt = b0;
    offset += 1;
    return true;
  }
  if ((b0 & 0x40) == 0) return false;
  std::size_t length = (b0 & 0x20) == 0 ? 2 : (b0 & 0x10) == 0 ? 3 : (b0 & 0x08) == 0 ? 4 : 0;
  if (length == 0) return false;
  for (std::size_t k = 1; k < length; ++k) {
    if (!is_continuation(text, offset + k)) return false;
  }
  const std::uint32_t lead_mask = length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07;
  cpt = b0 & lead_mask;
  for (std::size_t k = 1; k < length; ++k) cpt = (cpt << 6) | (byte_at(text, offset + k) & 0x3F);
  offset += length;
  return true;
}

// The range of `table` that holds `cpt`, or null.
const CategoryRange* find_range(std::span<const CategoryRange> table, std::uint32_t cpt) {
  auto it = std::upper_bound(table.begin(), table.end(), cpt,
                             [](std::uint32_t c, const CategoryRange& r) { return c < r.first; });
  if (it == table.begin() || cpt > std::prev(it)->last) return nullptr;
  return &*std::prev(it);
}

}  // namespace

GeneralCategory general_category(std::uint32_t cpt) {
  if (cpt < 128) return ascii_categories()[cpt];
  // The classes most text is made of first: a letter takes one search.
  // Each table is fetched only when the ones before it missed.
  using Table = std::span<const CategoryRange> (*)();
  static constexpr Table tables[] = {letter_ranges, punctuation_ranges, separator_ranges, number_ranges,
                                     symbol_ranges, mark_ranges,        other_ranges};
  for (const Table table : tables) {
    if (const CategoryRange* r = find_range(table(), cpt)) return r->category;
  }
  return GeneralCategory::cn;
}

bool is_letter(std::uint32_t cpt) { return find_range(letter_ranges(), cpt) != nullptr; }

bool is_number(std::uint32_t cpt) { return find_range(number_ranges(), cpt) != nullptr; }

bool is_whitespace(std::uint32_t cpt) {
  // PropList.txt White_Space; unchanged since Unicode 6.
  if (cpt >= 0x09 && cpt <= 0x0D) return true;
  if (cpt >= 0x2000 && cpt <= 0x200A) return true;
  switch (cpt) {
    case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F:
    case 0x205F: case 0x3000:
      return true;
    default:
      return false;
  }
}

std::size_t utf8_sequence_length(char lead) {
  static constexpr std::size_t by_high_bits[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return by_high_bits[static_cast<unsigned char>(lead) >> 4];
}

std::vector<std::uint32_t> decode_utf8(std::string_view text) {
  std::vector<std::uint32_t> cpts;
  cpts.reserve(text.size());
  std::size_t offset = 0;
  while (offset < text.size()) {
    std::uint32_t cpt = 0;
    if (decode_one(text, offset, cpt)) {
      cpts.push_back(cpt);
    } else {
      cpts.push_back(replacement_character);
      ++offset;
    }
  }
  return cpts;
}

void append_utf8(std::string& out, std::uint32_t cpt) {
  if (cpt <= 0x7F) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt <= 0x7FF) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0x10FFFF) {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    append_utf8(out, replacement_character);
  }
}

std::string encode_utf8(std::uint32_t cpt) {
  std::string out;
  append_utf8(out, cpt);
  return out;
}

bool is_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const std::uint32_t b0 = byte_at(text, i);
    std::size_t length = b0 < 0x80 ? 1 : b0 < 0xC2 ? 0 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : b0 < 0xF5 ? 4 : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (std::size_t k = 1; k < length; ++k) {
      if (!is_continuation(text, i + k)) return false;
    }
    if (length == 3) {
      const std::uint32_t b1 = byte_at(text, i + 1);
      if ((b0 == 0xE0 && b1 < 0xA0) || (b0 == 0xED && b1 >= 0xA0)) return false;
    } else if (length == 4) {
      const std::uint32_t b1 = byte_at(text, i + 1);
      if ((b0 == 0xF0 && b1 < 0x90) || (b0 == 0xF4 && b1 >= 0x90)) return false;
    }
    i += length;
  }
  return true;
}

}  // namespace pensieve::model::unicode
