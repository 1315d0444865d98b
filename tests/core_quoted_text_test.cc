// core/quoted_text.h: input quoted in a message never carries a control
// byte to the terminal raw.
#include <doctest/doctest.h>

#include <string>

#include "core/quoted_text.h"

using foldplan::EscapeControlBytes;
using foldplan::Quoted;

TEST_CASE("ESC, BEL, other C0 bytes and DEL are escaped as \\xNN") {
  CHECK(Quoted("node\x1b[31mred\x07") == "\"node\\x1b[31mred\\x07\"");
  CHECK(Quoted(std::string("a\0b", 3)) == "\"a\\x00b\"");
  CHECK(Quoted("x\x7fy") == "\"x\\x7fy\"");
  CHECK(Quoted("line\nnext\t") == "\"line\\x0anext\\x09\"");
}

TEST_CASE("C1 controls in UTF-8 are escaped and other UTF-8 text is kept") {
  CHECK(Quoted("\xc2\x9b" "2J") == "\"\\xc2\\x9b2J\"");
  CHECK(Quoted("gr\xc3\xbc\xc3\x9f") == "\"gr\xc3\xbc\xc3\x9f\"");
}

TEST_CASE("a long value is cut after its bound, with ... after the quote") {
  CHECK(Quoted(std::string(100, 'a'), 10) == "\"aaaaaaaaaa\"...");
}

TEST_CASE("a whole message keeps its newlines and tabs but escapes the rest") {
  CHECK(EscapeControlBytes("one\n\ttwo\x1b]0;title\x07") == "one\n\ttwo\\x1b]0;title\\x07");
}
