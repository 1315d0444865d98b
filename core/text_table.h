// Plain-text tables and text for terminal output: columns sized to their
// widest cell, numbers right-aligned, text left-aligned; tables narrowed
// and long lines wrapped to a width (the terminal's, cli/output.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace foldplan {

class TextTable {
 public:
  enum class Align { kLeft, kRight };
  explicit TextTable(std::vector<std::string> headers, std::vector<Align> aligns = {});
  void AddRow(std::vector<std::string> cells);
  // A cell may hold several lines ('\n'); a column is never narrowed
  // below `width` (for one whose text reads badly cut, like a layout).
  void SetMinWidth(size_t column, size_t width);
  // Rendered with two spaces between columns and a rule under the header.
  // With `max_width` > 0, a table wider than it has its left-aligned
  // columns narrowed, widest first, to no less than their header (and 8
  // characters), their cells wrapped onto more lines: text columns give
  // way, numbers never do. A table that cannot narrow enough stays wider.
  std::string Render(const std::string& indent = "", size_t max_width = 0) const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> aligns_;
  std::vector<size_t> min_width_;
  std::vector<std::vector<std::string>> rows_;
};

// `text` cut into pieces of at most `width` characters: at a space (which
// is dropped), else after a comma or '|', else anywhere (a word longer
// than the width). Empty text is one empty piece.
std::vector<std::string> WrapWords(std::string_view text, size_t width);

// Every line of `text` longer than `width` wrapped (WrapWords); its
// continuation lines indented to the value of a "label    value" line
// (the column after the first gap of two spaces), else two spaces past the
// line's own indent. Lines that fit are left as they are.
std::string WrapLines(std::string_view text, size_t width);

// The length of the longest line of `text`.
size_t WidestLine(std::string_view text);

// 1234567 -> "1,234,567".
std::string WithCommas(unsigned long long n);

}  // namespace foldplan
