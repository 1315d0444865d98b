// The nearest name to a mistyped one (core/nearest_name.h): what "did you
// mean ...?" offers for a typo'd command, flag, value or shipped name.
#include <doctest/doctest.h>

#include "core/nearest_name.h"

namespace nearest_name_test {

using foldplan::ChoiceNames;
using foldplan::DidYouMean;
using foldplan::NearestName;

const std::vector<std::string> kCommands = {"list", "check", "topo", "enumerate", "ranks", "plan",
                                            "simulate", "explain", "diff", "validate", "report"};

TEST_CASE("a swap, a slip or a missing letter finds the name; a far word finds none") {
  CHECK(NearestName("plna", kCommands) == "plan");          // neighbours swapped
  CHECK(NearestName("simualte", kCommands) == "simulate");
  CHECK(NearestName("enumrate", kCommands) == "enumerate");  // a letter missing
  CHECK(NearestName("rank", kCommands) == "ranks");
  CHECK(NearestName("PLAN", kCommands) == "plan");          // case aside
  CHECK(NearestName("--tpo", {"--top", "--threads", "--json"}) == "--top");
  CHECK(NearestName("thruput", {"throughput", "memory"}) == "throughput");
  CHECK_FALSE(NearestName("banana", kCommands).has_value());
  CHECK_FALSE(NearestName("abc", {"text", "json", "csv"}).has_value());
  CHECK_FALSE(NearestName("", kCommands).has_value());
}

TEST_CASE("a prefix of exactly one name finds it") {
  CHECK(NearestName("sim", kCommands) == "simulate");
  CHECK(NearestName("enum", kCommands) == "enumerate");
  CHECK_FALSE(NearestName("e", kCommands).has_value());  // too short to say
}

TEST_CASE("DidYouMean says it, or says nothing") {
  CHECK(DidYouMean("plna", kCommands) == "; did you mean \"plan\"?");
  CHECK(DidYouMean("banana", kCommands).empty());
}

TEST_CASE("ChoiceNames reads the names a choices text lists") {
  CHECK(ChoiceNames("bf16, fp8-delayed, fp8-tensorwise (alias fp8), mxfp8") ==
        std::vector<std::string>{"bf16", "fp8-delayed", "fp8-tensorwise", "fp8", "mxfp8"});
  CHECK(ChoiceNames("text|json|csv") == std::vector<std::string>{"text", "json", "csv"});
  CHECK(ChoiceNames("1f1b, gpipe or dualpipev") == std::vector<std::string>{"1f1b", "gpipe", "dualpipev"});
}

}  // namespace nearest_name_test
