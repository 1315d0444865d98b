// The report's SVG writer: text is escaped wherever it lands (content,
// attributes, hover titles), numbers print compactly and stay valid.
#include <doctest/doctest.h>

#include <string>

#include "report/svg.h"
#include "tests/text_count.h"

namespace foldplan {
namespace {

using foldplan::testing::Count;

TEST_CASE("svg: every markup character of a layout string becomes an entity") {
  // & first, so that the entities themselves are not escaped twice.
  CHECK(EscapeXml("tp=2,order=<tp-cp>&\"x\"'y'") == "tp=2,order=&lt;tp-cp&gt;&amp;&quot;x&quot;&#39;y&#39;");
  CHECK(EscapeXml("&amp;") == "&amp;amp;");
  CHECK(EscapeXml("tp=2,cp=1,pp=8,ep=8,etp=1") == "tp=2,cp=1,pp=8,ep=8,etp=1");
}

TEST_CASE("svg: a hover title and a text cannot open an element") {
  Svg svg(100, 50, "test");
  svg.Rect(0, 0, 10, 10, "#fff", "layout </title><script>alert(1)</script>");
  svg.Text(1, 2, "a<b>&c");
  const std::string out = svg.Finish();
  CHECK(Count(out, "<script") == 0);
  CHECK(out.find("&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
  CHECK(out.find(">a&lt;b&gt;&amp;c</text>") != std::string::npos);
  // One <title> per titled shape: opened and closed once.
  CHECK(Count(out, "<title>") == 1);
  CHECK(Count(out, "</title>") == 1);
  CHECK(out.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"test\" width=\"100\" height=\"50\"", 0) == 0);
}

TEST_CASE("svg: numbers print with at most the digits asked and no trailing zeros") {
  CHECK(Num(12.0) == "12");
  CHECK(Num(12.5) == "12.5");
  CHECK(Num(1.23456, 3) == "1.235");
  CHECK(Num(-0.0001) == "0");  // rounds to zero: no "-0"
  CHECK(Num(1.0 / 0.0) == "0");  // non-finite: still a valid coordinate
  CHECK(SecondsText(2.5) == "2.5 s");
  CHECK(SecondsText(0.0456) == "45.6 ms");
  CHECK(SecondsText(812e-6) == "812 us");
}

}  // namespace
}  // namespace foldplan
