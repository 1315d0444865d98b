// core/order_string.h: the one reading of Megatron order strings. Tokens
// are '-'-separated axis names from tp, cp, ep, dp, pp; the first empty,
// unknown or repeated token is the problem, named by a view into the input.
#include <doctest/doctest.h>

#include "core/order_string.h"

using foldplan::kOrderAxisNames;
using foldplan::OrderString;
using foldplan::ParseOrderString;
using Problem = OrderString::Problem;

TEST_CASE("order strings: axes in the order given, as kOrderAxisNames indices") {
  const OrderString full = ParseOrderString("tp-cp-ep-dp-pp");
  REQUIRE(full.ok());
  CHECK(full.count == 5);
  for (int i = 0; i < 5; ++i) CHECK(full.axes[static_cast<size_t>(i)] == i);

  const OrderString partial = ParseOrderString("pp-tp");
  REQUIRE(partial.ok());
  CHECK(partial.count == 2);
  CHECK(kOrderAxisNames[partial.axes[0]] == "pp");
  CHECK(kOrderAxisNames[partial.axes[1]] == "tp");
  CHECK(partial.Has(0));
  CHECK_FALSE(partial.Has(1));  // cp not named
}

TEST_CASE("order strings: the first problem, by kind and token") {
  struct Case {
    const char* order;
    Problem problem;
    const char* token;
  };
  for (const Case& c : {Case{"", Problem::kEmptyToken, ""}, Case{"tp-", Problem::kEmptyToken, ""},
                        Case{"tp--cp", Problem::kEmptyToken, ""},
                        Case{"tp-xp-tp", Problem::kUnknownAxis, "xp"},
                        Case{"TP", Problem::kUnknownAxis, "TP"},  // case matters here
                        Case{"tp-pp-tp-xp", Problem::kRepeatedAxis, "tp"}}) {
    CAPTURE(c.order);
    const OrderString parsed = ParseOrderString(c.order);
    CHECK(parsed.problem == c.problem);
    CHECK(parsed.token == c.token);
  }
}
