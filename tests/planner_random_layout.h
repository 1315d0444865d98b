// Random layouts for the tests that hold group placement to the rank map:
// degrees that multiply out to `world`, an order drawn from `orders` (which
// may hold orders Megatron refuses: both sides must refuse them alike), and
// either placement.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "planner/enumerate.h"
#include "planner/layout.h"

namespace foldplan::testing {

inline int Pick(const std::vector<int>& values, std::mt19937& rng) {
  return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
}

inline Layout RandomLayout(int world, const std::vector<std::string>& orders, std::mt19937& rng) {
  Layout l;
  l.world = world;
  l.pp = Pick(Divisors(world), rng);
  const int stage = world / l.pp;
  l.tp = Pick(Divisors(stage), rng);
  l.cp = Pick(Divisors(stage / l.tp), rng);
  l.dp = stage / (l.tp * l.cp);
  l.etp = Pick(Divisors(stage), rng);
  l.ep = Pick(Divisors(stage / l.etp), rng);
  l.edp = stage / (l.etp * l.ep);
  l.order = orders[std::uniform_int_distribution<size_t>(0, orders.size() - 1)(rng)];
  l.placement = rng() % 2 ? Placement::kPacked : Placement::kLinear;
  return l;
}

}  // namespace foldplan::testing
