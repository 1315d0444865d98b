// The dispatch op's routing draw (validate/expert_draw.h): top_k distinct
// experts in range for every skew foldbench accepts. Skews that left fewer
// positive weights than top_k (1100, 2000, 1e308, inf: 1 / (e + 1)^skew
// underflows to 0 past expert 0) walked the draw below expert 0 and
// corrupted the heap.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "validate/expert_draw.h"

using namespace foldplan::validate;

namespace {

// Every token's draw: top_k experts, distinct, in [0, experts).
void ExpertDrawCheckTokens(int64_t experts, int64_t top_k, double skew) {
  const std::vector<double> weights = ExpertWeights(experts, true, skew);
  std::vector<int32_t> drawn;
  for (uint64_t token = 0; token < 200; ++token) {
    DrawExperts(weights, top_k, token * 0x9E3779B97F4A7C15ULL, &drawn);
    REQUIRE(drawn.size() == static_cast<size_t>(top_k));
    const std::set<int32_t> distinct(drawn.begin(), drawn.end());
    CHECK(distinct.size() == drawn.size());
    for (int32_t e : drawn) {
      CHECK(e >= 0);
      CHECK(e < experts);
    }
  }
}

}  // namespace

TEST_CASE("skews whose weights underflow still draw top_k distinct experts in range") {
  for (double skew : {1100.0, 2000.0, 1e308, HUGE_VAL}) {
    CAPTURE(skew);
    ExpertDrawCheckTokens(8, 2, skew);
    ExpertDrawCheckTokens(8, 8, skew);
    ExpertDrawCheckTokens(256, 8, skew);
  }
}

TEST_CASE("ordinary skews and uniform routing draw top_k distinct experts") {
  for (double skew : {0.0, 0.5, 1.0, 4.0, 1000.0}) {
    CAPTURE(skew);
    ExpertDrawCheckTokens(8, 2, skew);
    ExpertDrawCheckTokens(64, 64, skew);
  }
}

TEST_CASE("with every weight past expert 0 gone the draw is the heaviest experts") {
  // The limit of the skewed draw: 0 first, then the lowest-numbered left.
  std::vector<int32_t> drawn;
  DrawExperts(ExpertWeights(8, true, 1e308), 3, 12345, &drawn);
  CHECK(drawn == std::vector<int32_t>{0, 1, 2});
}

TEST_CASE("the draw is unchanged where it was correct: a pure function of the hash") {
  const std::vector<double> weights = ExpertWeights(8, true, 1.0);
  std::vector<int32_t> a, b;
  DrawExperts(weights, 2, 42, &a);
  DrawExperts(weights, 2, 42, &b);
  CHECK(a == b);
  // Uniform weights are all 1.
  CHECK(ExpertWeights(4, false, 5.0) == std::vector<double>{1, 1, 1, 1});
}
