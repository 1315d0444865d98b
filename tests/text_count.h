// How many times `what` occurs in `text`, without overlaps: the count the
// tests assert of rendered output (cells in a page, lines in a report).
#pragma once

#include <cstddef>
#include <string_view>

namespace foldplan::testing {

inline std::size_t Count(std::string_view text, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace foldplan::testing
