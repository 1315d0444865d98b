// core/json_check.h at the edges a hostile file reaches: nesting past
// kMaxJsonDepth and duplicate keys are refused by their JSON pointer before
// any reader walks the value, and a "found ..." quote stays short whatever
// the size of the value quoted.
#include <doctest/doctest.h>

#include <string>

#include "core/json_check.h"

using foldplan::DescribeJsonValue;
using foldplan::kMaxJsonDepth;
using foldplan::ParseJsonText;

namespace {

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

}  // namespace

TEST_CASE("json nesting up to kMaxJsonDepth parses; one level more is refused at its pointer") {
  CHECK(ParseJsonText(Nested(kMaxJsonDepth), "f.json").ok());

  auto deeper = ParseJsonText(Nested(kMaxJsonDepth + 1), "f.json");
  REQUIRE(!deeper.ok());
  std::string pointer;
  for (int i = 0; i < kMaxJsonDepth; ++i) pointer += "/0";
  CHECK(deeper.status().message() == "f.json: " + pointer + ": nested deeper than 64 levels, the most a foldplan file may have");
}

TEST_CASE("json nesting a hundred thousand levels deep is an error, not a stack overflow") {
  auto deep = ParseJsonText(std::string(100000, '[') + std::string(100000, ']'), "deep.json");
  REQUIRE(!deep.ok());
  CHECK(deep.status().message().rfind("deep.json: /0/0/", 0) == 0);
  auto unclosed = ParseJsonText("{\"a\":" + std::string(100000, '['), "open.json");
  REQUIRE(!unclosed.ok());
  CHECK(unclosed.status().message().rfind("open.json: /a/0/0", 0) == 0);
}

TEST_CASE("json depth counts objects and arrays alike, and names keys and indices") {
  std::string text = "{\"x\":[1,2,{\"y~/\":" + Nested(kMaxJsonDepth - 3) + "}]}";
  auto at_limit = ParseJsonText(text, "f.json");
  CHECK(at_limit.ok());
  text = "{\"x\":[1,2,{\"y~/\":" + Nested(kMaxJsonDepth - 2) + "}]}";
  auto over = ParseJsonText(text, "f.json");
  REQUIRE(!over.ok());
  CHECK(over.status().message().rfind("f.json: /x/2/y~0~1/0/", 0) == 0);
}

TEST_CASE("json objects with a repeated key are refused, naming the key's pointer") {
  auto dup = ParseJsonText(R"({"a": {"b": 1, "c": [ {"d": 1, "d": 2} ]}})", "f.json");
  REQUIRE(!dup.ok());
  CHECK(dup.status().message().rfind("f.json: /a/c/0/d: duplicate key", 0) == 0);
  // The same key in different objects is fine.
  CHECK(ParseJsonText(R"({"a": {"d": 1}, "b": {"d": 1}, "d": [{"d": 1}, {"d": 2}]})", "f.json").ok());
}

TEST_CASE("json syntax errors still name line and column") {
  auto bad = ParseJsonText("{\n  \"a\": 1,\n  \"b\": }\n", "f.json");
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().rfind("f.json:3:8: not valid JSON: syntax error", 0) == 0);
}

TEST_CASE("a quoted value is at most 60 characters, however large the value") {
  nlohmann::json big = nlohmann::json::array();
  for (int i = 0; i < 200000; ++i) big.push_back(i);
  const std::string quoted = DescribeJsonValue(big);
  CHECK(quoted.rfind("an array [0,1,2,", 0) == 0);
  CHECK(quoted.size() == std::string("an array ").size() + 60);
  CHECK(quoted.substr(quoted.size() - 3) == "...");

  CHECK(DescribeJsonValue(nlohmann::json(std::string(1 << 20, 'x'))).size() ==
        std::string("the string ").size() + 60);
  // Short values are quoted whole, exactly as compact JSON.
  CHECK(DescribeJsonValue(nlohmann::json::parse(R"({"a":[1,2.5,"x"]})")) == R"(an object {"a":[1,2.5,"x"]})");
  CHECK(DescribeJsonValue(nlohmann::json("2")) == "the string \"2\"");
}

TEST_CASE("a quote cut inside a UTF-8 character is cut before it, and stays valid UTF-8") {
  // 30 two-byte characters then more: the cut at 57 bytes falls inside one.
  std::string s;
  for (int i = 0; i < 40; ++i) s += "\xc3\xa9";  // e-acute
  const std::string quoted = DescribeJsonValue(nlohmann::json(s));
  // Valid UTF-8 survives a strict dump.
  CHECK_NOTHROW((void)nlohmann::json(quoted).dump());
  CHECK(quoted.substr(quoted.size() - 3) == "...");
}
