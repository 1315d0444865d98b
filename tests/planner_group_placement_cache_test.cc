// GroupPlacementCache (planner/group_placement.h) changes no result:
// PlaceGroups with a cache shared by many random layouts on one topology
// returns exactly what it returns without one, every field of every kind
// (tiers included) and every error message; and the integer axes agree
// with the rank generators wherever those accept the order.
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "fixtures.h"
#include "planner/enumerate.h"
#include "planner/group_placement.h"
#include "planner/rank_generator.h"
#include "topology/topology.h"
#include "planner_random_layout.h"
#include "topology_fixtures.h"

namespace foldplan {
namespace {

using testing::MustBuild;
using testing::RandomLayout;

// Orders Megatron accepts and refuses alike (ep with cp, upper case, an
// axis missing or unknown): the cached call must refuse them the same way.
const std::vector<std::string> kOrders = {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-ep-cp-dp-pp",
                                          "cp-tp-ep-dp-pp", "tp-dp-cp-ep-pp", "ep-tp-cp-dp-pp",
                                          "TP-CP-EP-DP-PP", "tp-cp-dp-pp",    "tp-cp-xx-dp-pp"};

bool SameDouble(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void RequireSame(const Result<LayoutPlacement>& want, const Result<LayoutPlacement>& got, const Layout& l) {
  INFO("layout: " << FormatLayout(l));
  REQUIRE(want.ok() == got.ok());
  if (!want.ok()) {
    REQUIRE(want.status().message() == got.status().message());
    return;
  }
  for (GroupKind kind : kTimedGroupKinds) {
    const GroupPlacement& a = want->of(kind);
    const GroupPlacement& b = got->of(kind);
    INFO("kind " << static_cast<int>(kind));
    REQUIRE(a.kind == b.kind);
    REQUIRE(a.size == b.size);
    REQUIRE(a.groups == b.groups);
    REQUIRE(a.groups_sharing_links == b.groups_sharing_links);
    REQUIRE(a.span.gpus == b.span.gpus);
    REQUIRE(a.span.nodes == b.span.nodes);
    REQUIRE(a.span.domains == b.span.domains);
    REQUIRE(a.span.rails == b.span.rails);
    REQUIRE(a.span.scalable_units == b.span.scalable_units);
    REQUIRE(a.span.min_per_domain == b.span.min_per_domain);
    REQUIRE(a.span.max_per_domain == b.span.max_per_domain);
    REQUIRE(a.span.inside_one_domain == b.span.inside_one_domain);
    REQUIRE(a.span.crosses_spine == b.span.crosses_spine);
    REQUIRE(a.span.tiers.size() == b.span.tiers.size());
    for (size_t t = 0; t < a.span.tiers.size(); ++t) {
      REQUIRE(a.span.tiers[t].tier == b.span.tiers[t].tier);
      REQUIRE(SameDouble(a.span.tiers[t].gb_per_s, b.span.tiers[t].gb_per_s));
      REQUIRE(SameDouble(a.span.tiers[t].latency_us, b.span.tiers[t].latency_us));
      REQUIRE(a.span.tiers[t].hops == b.span.tiers[t].hops);
    }
  }
}

TEST_CASE("PlaceGroups with a GroupPlacementCache equals PlaceGroups without") {
  std::mt19937 rng(1313);
  struct Case {
    ClusterSpec cluster;
    std::vector<int> worlds;  // kLayoutsPerWorld random layouts of each
  };
  // Random layouts rather than every one: a world of 144 has 204,792
  // (degrees x six orders x two placements), minutes under the sanitizers;
  // 2,000 a world still meet each kind's key thousands of times.
  constexpr int kLayoutsPerWorld = 2000;
  // Clusters where bases matter: 72-GPU domains that 2^k blocks do not fill,
  // SUs smaller than a domain, SUs of 3 nodes; and one with periods below the world.
  const Case cases[] = {
      {testing::Nvl72(4, 18), {144, 288}},
      {testing::Nvl72(4, 9), {96, 48, 288}},
      {testing::DgxH100(24, 3), {96, 192}},
      {testing::DgxH100(16, 4), {64, 128}},
      {testing::DgxH100(256, 32), {2048}},
  };
  size_t placed = 0, hits = 0;
  for (const Case& c : cases) {
    const Topology topo = MustBuild(c.cluster);
    GroupPlacementCache cache;     // one per topology, shared by every layout and world
    GroupPlacementCache small(8);  // clears often
    GroupPlacementCache filling;   // for the form that fills a caller's placement
    LayoutPlacement into;          // filled layout after layout, never cleared
    for (int world : c.worlds) {
      for (int trial = 0; trial < kLayoutsPerWorld; ++trial) {
        const Layout l = RandomLayout(world, kOrders, rng);
        const Result<LayoutPlacement> want = PlaceGroups(l, topo);
        RequireSame(want, PlaceGroups(l, topo, &cache), l);
        RequireSame(want, PlaceGroups(l, topo, &small), l);
        REQUIRE(small.size() <= 8);
        if (const Status filled = PlaceGroups(l, topo, &filling, &into); filled.ok()) {
          RequireSame(want, into, l);
          REQUIRE(into == *want);  // the kinds not timed too
        } else {
          RequireSame(want, filled, l);
        }
        placed += want.ok();
      }
    }
    hits += cache.hits();
  }
  CHECK(placed > 10000);
  CHECK(hits > placed);  // the cache served most kinds, so the comparison covers its answers
}

TEST_CASE("an order the rank generator refuses is refused with its message, cache or not") {
  const Topology topo = MustBuild(testing::DgxH100(2));
  Layout l = testing::FromDegrees(2, 1, 8, 1, 2, 1);
  l.order = "tp-cp-xx-dp-pp";
  GroupPlacementCache cache;
  const Result<LayoutPlacement> placed = PlaceGroups(l, topo, &cache);
  REQUIRE(!placed.ok());
  CHECK(placed.status().message() == MakeFoldedGenerators(l).status().message());
  // Upper case is what the generator accepts (it lowers it): the same placement.
  Layout upper = l;
  upper.order = "TP-CP-EP-DP-PP";
  l.order = "tp-cp-ep-dp-pp";
  RequireSame(PlaceGroups(l, topo), PlaceGroups(upper, topo, &cache), upper);
}

TEST_CASE("GroupPlacementCache finds what was put under a key, only that, and clears at its bound") {
  // Keys that differ in one word, anywhere, and many that collide in the
  // slot bits, a third of them the key before again (hits even at bound 1);
  // a map with the same clearing rule is the reference.
  std::mt19937 rng(77);
  for (size_t bound : {size_t{1}, size_t{8}, size_t{100}, size_t{8192}}) {
    GroupPlacementCache cache(bound);
    std::map<GroupPlacementCache::Key, GroupPlacement> want;
    size_t hits = 0, misses = 0;
    GroupPlacementCache::Key key{};
    for (int trial = 0; trial < 20000; ++trial) {
      if (rng() % 3 != 0) {
        key = {};
        for (size_t w = 0; w < 6; ++w) key[w] = static_cast<int32_t>(rng() % 3);
        key[rng() % key.size()] = static_cast<int32_t>(rng() % 64);
      }
      const GroupPlacement* got = cache.Find(key);
      const auto it = want.find(key);
      REQUIRE((got != nullptr) == (it != want.end()));
      if (got) {
        ++hits;
        REQUIRE(*got == it->second);
        continue;
      }
      ++misses;
      GroupPlacement placement;
      placement.size = static_cast<int>(rng() % 1000) + 1;
      placement.span.gpus = trial;
      if (want.size() >= bound) want.clear();
      want[key] = placement;
      cache.Put(key, placement);
      REQUIRE(cache.size() == want.size());
    }
    CHECK(cache.hits() == hits);
    CHECK(cache.misses() == misses);
    CHECK(hits > 0);
    cache.Clear();
    CHECK(cache.size() == 0);
    CHECK(cache.Find(key) == nullptr);
  }
}

}  // namespace
}  // namespace foldplan
