#include "core/text_table.h"

#include <algorithm>

namespace foldplan {

namespace {

// Narrowest a text column is made: its header, and 8 characters.
constexpr size_t kMinTextColumn = 8;

}  // namespace

TextTable::TextTable(std::vector<std::string> headers, std::vector<Align> aligns)
    : headers_(std::move(headers)), aligns_(std::move(aligns)) {
  aligns_.resize(headers_.size(), Align::kLeft);
  min_width_.resize(headers_.size(), 0);
}

void TextTable::SetMinWidth(size_t column, size_t width) {
  if (column < min_width_.size()) min_width_[column] = width;
}

namespace {

// The lines of a cell and the longest one.
std::vector<std::string_view> CellLines(std::string_view cell) {
  std::vector<std::string_view> out;
  for (size_t at = 0;;) {
    const size_t end = cell.find('\n', at);
    out.push_back(cell.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
    if (end == std::string_view::npos) return out;
    at = end + 1;
  }
}

size_t CellWidth(std::string_view cell) {
  size_t w = 0;
  for (std::string_view line : CellLines(cell)) w = std::max(w, line.size());
  return w;
}

}  // namespace

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::Render(const std::string& indent, size_t max_width) const {
  const size_t columns = headers_.size();
  std::vector<size_t> width(columns);
  for (size_t c = 0; c < columns; ++c) {
    width[c] = headers_[c].size();
    for (const auto& row : rows_) width[c] = std::max(width[c], CellWidth(row[c]));
  }
  if (max_width > 0) {
    size_t total = indent.size() + (columns > 0 ? 2 * (columns - 1) : 0);
    for (size_t w : width) total += w;
    // One character at a time off the widest text column that can give it.
    while (total > max_width) {
      size_t widest = columns;
      for (size_t c = 0; c < columns; ++c) {
        const size_t least = std::max({headers_[c].size(), kMinTextColumn, min_width_[c]});
        if (aligns_[c] != Align::kLeft || width[c] <= least) continue;
        if (widest == columns || width[c] > width[widest]) widest = c;
      }
      if (widest == columns) break;
      --width[widest];
      --total;
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = indent;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      const bool last = c + 1 == cells.size();
      if (aligns_[c] == Align::kRight) out += pad + cells[c];
      else out += cells[c] + (last ? "" : pad);
      if (!last) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  // A row as one line or more: each cell cut to its column's width.
  auto lines = [&](const std::vector<std::string>& cells) {
    std::vector<std::vector<std::string>> pieces(columns);
    size_t height = 1;
    for (size_t c = 0; c < columns; ++c) {
      for (std::string_view line : CellLines(cells[c])) {
        for (std::string& piece : WrapWords(line, width[c])) pieces[c].push_back(std::move(piece));
      }
      height = std::max(height, pieces[c].size());
    }
    std::string out;
    for (size_t h = 0; h < height; ++h) {
      std::vector<std::string> part(columns);
      for (size_t c = 0; c < columns; ++c) {
        if (h < pieces[c].size()) part[c] = pieces[c][h];
      }
      out += line(part);
    }
    return out;
  };
  std::string out = lines(headers_);
  std::vector<std::string> rule;
  for (size_t w : width) rule.push_back(std::string(w, '-'));
  out += line(rule);
  for (const auto& row : rows_) out += lines(row);
  return out;
}

std::vector<std::string> WrapWords(std::string_view text, size_t width) {
  width = std::max<size_t>(width, 1);
  std::vector<std::string> out;
  while (text.size() > width) {
    size_t cut = text.rfind(' ', width);
    size_t next = cut + 1;  // the space is dropped
    if (cut == std::string_view::npos || cut == 0) {
      // No space to break at: after the last comma or bar that fits.
      const size_t mark = text.substr(0, width).find_last_of(",|");
      cut = mark == std::string_view::npos ? width : mark + 1;
      next = cut;
    }
    out.emplace_back(text.substr(0, cut));
    while (!out.back().empty() && out.back().back() == ' ') out.back().pop_back();
    text.remove_prefix(next);
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  }
  if (!text.empty() || out.empty()) out.emplace_back(text);
  return out;
}

std::string WrapLines(std::string_view text, size_t width) {
  std::string out;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    const bool newline = end != std::string_view::npos;
    if (line.size() <= width || width == 0) {
      out.append(line);
      if (newline) out += '\n';
      continue;
    }
    const size_t lead = std::min(line.find_first_not_of(' '), line.size());
    // "  step         13.58 s = ...": the value wraps in its own column,
    // under "13.58"; other lines hang two spaces past their indent.
    size_t value = 0;
    const size_t gap = line.find("  ", lead);
    if (gap != std::string_view::npos) {
      const size_t at = line.find_first_not_of(' ', gap);
      if (at != std::string_view::npos && at <= width / 2) value = at;
    }
    if (value > 0) {
      const std::vector<std::string> pieces = WrapWords(line.substr(value), width - value);
      out.append(line.substr(0, value));
      for (size_t i = 0; i < pieces.size(); ++i) out += (i ? std::string(value, ' ') : "") + pieces[i] + "\n";
    } else {
      const size_t hang = std::min(lead, width / 4) + 2;
      const std::vector<std::string> first = WrapWords(line.substr(lead), width - lead);
      out.append(line.substr(0, lead));
      out += first.front() + "\n";
      std::string_view rest = line.substr(lead);
      rest.remove_prefix(std::min(rest.size(), first.front().size()));
      while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
      if (!rest.empty()) {
        for (const std::string& piece : WrapWords(rest, width - hang)) out += std::string(hang, ' ') + piece + "\n";
      }
    }
    if (!newline) out.pop_back();
  }
  return out;
}

size_t WidestLine(std::string_view text) { return CellWidth(text); }

std::string WithCommas(unsigned long long n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace foldplan
