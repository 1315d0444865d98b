// SplitLayers: Megatron's even and uneven (first/last) pipeline splits.
#include <doctest/doctest.h>

#include <numeric>

#include "planner/pipeline_split.h"

using namespace foldplan;

TEST_CASE("layers that divide evenly are split evenly") {
  auto s = SplitLayers(32, 4, 2);
  REQUIRE(s.ok());
  CHECK(s.value() == std::vector<int>(8, 4));
}

TEST_CASE("DeepSeek-V3's 61 layers over 16 stages: first 3, middle 4, last 2") {
  // The heaviest stage cannot hold fewer than ceil(61/16) = 4 layers. With 14
  // middle stages of 4, the first and last share 61 - 56 = 5: 3 and 2 (the
  // last, which also holds the output layer, is the lighter).
  auto s = SplitLayers(61, 16, 1);
  REQUIRE(s.ok());
  std::vector<int> expected(16, 4);
  expected.front() = 3;
  expected.back() = 2;
  CHECK(s.value() == expected);
}

TEST_CASE("61 layers over 8 stages: first 7, middle 8, last 6") {
  // m = ceil(61/8) = 8; 61 - 6*8 = 13 = 7 + 6.
  auto s = SplitLayers(61, 8, 1);
  REQUIRE(s.ok());
  CHECK(s.value() == std::vector<int>{7, 8, 8, 8, 8, 8, 8, 6});
}

TEST_CASE("with vpp, every stage's count divides by vpp, chunks in Megatron order") {
  // 30 layers, pp 4, vpp 2: m = 8 gives first + last = 30 - 16 = 14 = 8 + 6:
  // ranks hold 8/8/8/6 layers, each as 2 chunks (4/4/4/3 per chunk).
  auto s = SplitLayers(30, 4, 2);
  REQUIRE(s.ok());
  CHECK(s.value() == std::vector<int>{4, 4, 4, 3, 4, 4, 4, 3});
  CHECK(std::accumulate(s->begin(), s->end(), 0) == 30);
}

TEST_CASE("no Megatron split exists: 61 layers over pp 8 with vpp 2") {
  // Middle stages need m even; first + last = 61 - 6m is odd, so the two
  // cannot both be even.
  auto s = SplitLayers(61, 8, 2);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message().find("no Megatron split") != std::string::npos);
}

TEST_CASE("one stage with vpp that does not divide the layers has no split") {
  CHECK(SplitLayers(61, 1, 1).ok());  // pp 1, vpp 1: all layers on one stage
  CHECK_FALSE(SplitLayers(61, 1, 2).ok());
}

