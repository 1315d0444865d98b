// Occurrences of a string in rendered output: whether `what` occurs in
// `text`, and how many times, without overlaps (the count the tests assert
// of cells in a page, lines in a report).
#pragma once

#include <cstddef>
#include <string_view>

namespace foldplan::testing {

// Whether `what` occurs in `text`.
inline bool Contains(std::string_view text, std::string_view what) { return text.find(what) != std::string_view::npos; }

inline std::size_t Count(std::string_view text, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace foldplan::testing
