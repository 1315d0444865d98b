// Plain-text tables and wrapped text (core/text_table.h): a table narrowed
// to a width wraps its text columns and keeps its numbers whole; long lines
// wrap with their continuation under the value.
#include <doctest/doctest.h>

#include <sstream>

#include "core/text_table.h"

namespace text_table_test {

using foldplan::TextTable;
using foldplan::WrapLines;
using foldplan::WrapWords;

size_t TextTableWidest(const std::string& text) {
  std::istringstream in(text);
  size_t widest = 0;
  for (std::string line; std::getline(in, line);) widest = std::max(widest, line.size());
  return widest;
}

TEST_CASE("a table over its width wraps its text columns onto more lines and keeps numbers whole") {
  TextTable t({"#", "what", "seconds"}, {TextTable::Align::kRight, TextTable::Align::kLeft, TextTable::Align::kRight});
  t.AddRow({"1", "moe_flex_dispatch 203.9 ms, moe_flex_combine_grad 203.7 ms, moe_flex_combine 203.6 ms", "13.58"});
  t.AddRow({"2", "short", "1234567.25"});
  const std::string wide = t.Render("  ");
  CHECK(TextTableWidest(wide) > 60);
  const std::string narrow = t.Render("  ", 60);
  CHECK(TextTableWidest(narrow) <= 60);
  CHECK(narrow.find("1234567.25") != std::string::npos);        // a number is never cut
  CHECK(narrow.find("moe_flex_combine_grad") != std::string::npos);  // words are kept whole
  // Every word of the wrapped cell is still there, in order.
  CHECK(narrow.find("203.6 ms") != std::string::npos);
  CHECK(narrow.find("203.6 ms") > narrow.find("203.9 ms"));
  // Without a width, or wide enough, the table is as before.
  CHECK(t.Render("  ", 500) == wide);
}

TEST_CASE("a table that cannot narrow enough stays as narrow as its headers allow") {
  TextTable t({"a long header", "n"}, {TextTable::Align::kLeft, TextTable::Align::kRight});
  t.AddRow({"x y z w v u t s r q p", "12345678901234567890"});
  const std::string out = t.Render("", 10);
  CHECK(out.find("a long header") != std::string::npos);
  CHECK(out.find("12345678901234567890") != std::string::npos);
}

TEST_CASE("words wrap at spaces, else after a comma or bar, else anywhere") {
  CHECK(WrapWords("aa bb cc", 5) == std::vector<std::string>{"aa bb", "cc"});
  CHECK(WrapWords("tp=8,cp=1,dp=2", 6) == std::vector<std::string>{"tp=8,", "cp=1,", "dp=2"});
  CHECK(WrapWords("abcdefgh", 3) == std::vector<std::string>{"abc", "def", "gh"});
  CHECK(WrapWords("", 3) == std::vector<std::string>{""});
}

TEST_CASE("long lines wrap under their value; lines that fit are left alone") {
  const std::string text =
      "  step         13.58 s = pipeline 13.40 s (of which bubble 95.0 ms) + exposed data-parallel 158.2 ms\n"
      "short line\n";
  const std::string out = WrapLines(text, 60);
  CHECK(TextTableWidest(out) <= 60);
  CHECK(out.find("\n               ") != std::string::npos);  // hung under "13.58"
  CHECK(out.substr(out.size() - 11) == "short line\n");
  CHECK(WrapLines(text, 200) == text);
  // A line without a label hangs two spaces in.
  const std::string prose(30, 'x');
  CHECK(WrapLines(prose + " " + prose + " " + prose + "\n", 70) == prose + " " + prose + "\n  " + prose + "\n");
}

}  // namespace text_table_test
