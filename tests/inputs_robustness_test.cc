// No input crashes the parsers: every value of every shipped file (leaves,
// objects and lists alike) is replaced in turn by each of a set of hostile
// values, and every key is removed in turn. Each result must be a value or
// an error whose every line names the file and a JSON pointer. Run this
// under -fsanitize=address,undefined to catch overflow and bad reads too.
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <string>

#include "core/json_check.h"
#include "inputs/loader.h"

using namespace foldplan;
using nlohmann::json;

namespace {

std::vector<json> HostileValues() {
  return {
      json(nullptr),
      json(true),
      json(-1),
      json(0),
      json(0.5),
      json(1e300),
      json(-1e300),
      json(std::numeric_limits<int64_t>::max()),
      json(std::numeric_limits<int64_t>::min()),
      json(std::numeric_limits<uint64_t>::max()),
      json(int64_t(1) << 31),  // one past int
      json(""),
      json("x"),
      json::array(),
      json::array({1, "a", nullptr}),
      json::object(),
      json::object({{"unexpected", 1}}),
  };
}

// Every JSON pointer in `j`, the root excluded.
void CollectPointers(const json& j, const json::json_pointer& at,
                     std::vector<json::json_pointer>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      out.push_back(at / it.key());
      CollectPointers(*it, at / it.key(), out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      out.push_back(at / i);
      CollectPointers(j[i], at / i, out);
    }
  }
}

using Parser = std::function<Status(const json&)>;

// The parse result's status, with each error line checked for its prefix.
void CheckOutcome(const Parser& parse, const json& edited, const std::string& what) {
  const Status status = parse(edited);
  if (status.ok()) return;
  std::istringstream lines(status.message());
  std::string line;
  while (std::getline(lines, line)) {
    CAPTURE(what);
    CAPTURE(line);
    CHECK(line.rfind("edited.json: /", 0) == 0);
  }
}

void Torture(const char* kind_dir, const char* name, const Parser& parse) {
  auto original = ParseJsonFile(std::string(FOLDPLAN_SOURCE_DIR) + "/data/" + kind_dir + "/" +
                                name + ".json");
  REQUIRE(original.ok());
  std::vector<json::json_pointer> pointers;
  CollectPointers(original.value(), json::json_pointer(), pointers);
  REQUIRE(!pointers.empty());
  for (const auto& pointer : pointers) {
    for (const json& hostile : HostileValues()) {
      json edited = original.value();
      edited[pointer] = hostile;
      CheckOutcome(parse, edited, pointer.to_string() + " = " + hostile.dump());
    }
    json removed = original.value();
    json& parent = removed[pointer.parent_pointer()];
    if (parent.is_array()) {
      parent.erase(std::stoul(pointer.back()));
    } else {
      parent.erase(pointer.back());
    }
    CheckOutcome(parse, removed, "removed " + pointer.to_string());
  }
  for (const json& hostile : HostileValues()) {
    CheckOutcome(parse, hostile, "whole file = " + hostile.dump());
  }
}

template <class Spec>
Parser StatusOf(Result<Spec> (*parse)(const json&, const std::string&)) {
  return [parse](const json& j) {
    auto r = parse(j, "edited.json");
    return r.ok() ? Status() : r.status();
  };
}

}  // namespace

TEST_CASE("hostile edits of every shipped cluster never crash") {
  auto list = ListShipped(InputKind::kCluster);
  REQUIRE(list.ok());
  for (const auto& s : list.value()) Torture("clusters", s.name.c_str(), StatusOf(&ParseCluster));
}

TEST_CASE("hostile edits of every shipped model never crash") {
  auto list = ListShipped(InputKind::kModel);
  REQUIRE(list.ok());
  for (const auto& s : list.value()) Torture("models", s.name.c_str(), StatusOf(&ParseModel));
}

TEST_CASE("hostile edits of every shipped job never crash") {
  auto list = ListShipped(InputKind::kJob);
  REQUIRE(list.ok());
  for (const auto& s : list.value()) Torture("jobs", s.name.c_str(), StatusOf(&ParseJob));
}

TEST_CASE("an accepted model always has counts that fit") {
  // The largest model the ranges allow without tripping the size rule.
  auto m = ParseModel(json{{"schema", "foldplan.model/v1"},
                           {"layers", 4096},
                           {"hidden", 262144},
                           {"heads", 4096},
                           {"kv_heads", 4096},
                           {"head_dim", 4096},
                           {"vocab", 16777216},
                           {"ffn_hidden", 4194304},
                           {"activation", "swiglu"},
                           {"attention", "mha"}},
                      "huge.json");
  REQUIRE_FALSE(m.ok());  // 4096 layers of 262144 x 4194304 MLPs are far past 1e15
  CHECK(m.status().message().find("huge.json: /: expected a model of at most 1e15 parameters") == 0);
}

TEST_CASE("text that is not JSON never crashes and names line and column") {
  for (const char* text : {"", "{", "}", "{\"a\":}", "[1,2", "\"unterminated", "nul", "{\"a\":1}}",
                           "\xff\xfe"}) {
    const std::string shown = text;
    CAPTURE(shown);
    auto j = ParseJsonText(text, "t.json");
    if (j.ok()) {
      CHECK_FALSE(ParseModel(j.value(), "t.json").ok());
    } else {
      CHECK(j.status().message().rfind("t.json:", 0) == 0);
    }
  }
}

TEST_CASE("a number too large for a double is an error, not a crash") {
  const std::string file = std::string(FOLDPLAN_TEST_DATA_DIR) + "/inputs/model_number_overflow.json";
  auto m = LoadModel(file);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().message().rfind(file + ": not valid JSON: ", 0) == 0);
  CHECK(m.status().message().find("1e999999") != std::string::npos);
}
