// Worst-case group placement (planner/group_placement.h) against the
// spans of every group of the rank map (planner/rank_map.h), which builds
// each group explicitly.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "fixtures.h"
#include "planner_random_layout.h"
#include "topology_fixtures.h"
#include "planner/group_placement.h"
#include "planner/rank_map.h"
#include "topology/topology.h"

namespace foldplan {
namespace {

ClusterSpec DgxSu(int nodes, int su_nodes = 32) { return testing::DgxH100(nodes, su_nodes); }
using testing::MustBuild;
using testing::Nvl72;
using testing::RandomLayout;

Layout DegreesLayout(int pp, int tp, int cp, int dp, int ep, int etp, std::string order = kDefaultOrder,
                  Placement placement = Placement::kLinear) {
  Layout l = testing::FromDegrees(tp, cp, dp, pp, ep, etp);
  l.order = std::move(order);
  l.placement = placement;
  return l;
}

// The reference: every group of the kind, spanned on the topology, the
// slowest by SlowerSpan.
GroupSpan WorstFromRankMap(const RankMap& map, GroupKind kind, const Topology& topo) {
  GroupSpan worst;
  bool have = false;
  for (const std::vector<int>& group : map.groups(kind)) {
    std::vector<int> gpus;
    for (int rank : group) gpus.push_back(map.place(rank).gpu);
    std::sort(gpus.begin(), gpus.end());
    GroupSpan span = topo.Span(gpus);
    if (!have || SlowerSpan(span, worst)) {
      worst = std::move(span);
      have = true;
    }
  }
  return worst;
}

void CheckSameSpan(const GroupSpan& got, const GroupSpan& want) {
  CHECK(got.gpus == want.gpus);
  CHECK(got.nodes == want.nodes);
  CHECK(got.domains == want.domains);
  CHECK(got.rails == want.rails);
  CHECK(got.scalable_units == want.scalable_units);
  CHECK(got.min_per_domain == want.min_per_domain);
  CHECK(got.max_per_domain == want.max_per_domain);
  CHECK(got.inside_one_domain == want.inside_one_domain);
  CHECK(got.crosses_spine == want.crosses_spine);
  REQUIRE(got.tiers.size() == want.tiers.size());
  for (size_t i = 0; i < got.tiers.size(); ++i) {
    CHECK(got.tiers[i].tier == want.tiers[i].tier);
    CHECK(got.tiers[i].gb_per_s == doctest::Approx(want.tiers[i].gb_per_s));
    // Equal latency and hops: the same representative pair class (a PXN hop
    // when the network pair changes rail), ties going to the first group.
    CHECK(got.tiers[i].latency_us == doctest::Approx(want.tiers[i].latency_us));
    CHECK(got.tiers[i].hops == want.tiers[i].hops);
  }
}

// PlaceGroups and the rank map agree on every timed kind (or both refuse).
void CheckAgainstRankMap(const Layout& layout, const Topology& topo) {
  CAPTURE(FormatLayout(layout));
  CAPTURE(topo.cluster().name);
  Result<RankMap> map = BuildRankMap(layout, topo.cluster());
  Result<LayoutPlacement> placed = PlaceGroups(layout, topo);
  REQUIRE_MESSAGE(map.ok() == placed.ok(),
                  (map.ok() ? placed.status().message() : map.status().message()));
  if (!map.ok()) return;
  for (GroupKind kind : kTimedGroupKinds) {
    CAPTURE(Name(kind));
    const GroupPlacement& g = placed->of(kind);
    CHECK(g.kind == kind);
    CHECK(static_cast<size_t>(g.groups) == map->groups(kind).size());
    CHECK(static_cast<size_t>(g.size) == map->groups(kind).front().size());
    CheckSameSpan(g.span, WorstFromRankMap(*map, kind, topo));
  }
}

TEST_CASE("hand-checked placements on two DGX nodes") {
  const Topology topo = MustBuild(DgxSu(2));
  // tp8 dp2: TP inside a node; each DP group has one rank in each node:
  // 2 domains of 1, rails 1 (local GPU k pairs with local GPU k); 8 DP groups
  // share each node's 8 NICs (one rank per node each).
  const Layout l = DegreesLayout(1, 8, 1, 2, 1, 8);
  Result<LayoutPlacement> p = PlaceGroups(l, topo);
  REQUIRE(p.ok());
  const GroupPlacement& tp = p->of(GroupKind::kTp);
  CHECK(tp.span.inside_one_domain);
  CHECK(tp.span.gpus == 8);
  CHECK(tp.groups == 2);
  CHECK(tp.groups_sharing_links == 1);
  const GroupPlacement& dp = p->of(GroupKind::kDp);
  CHECK(dp.span.domains == 2);
  CHECK(dp.span.min_per_domain == 1);
  CHECK(dp.span.rails == 1);
  CHECK(dp.groups == 8);
  CHECK(dp.groups_sharing_links == 8);
  // Expert view etp8 ep1 edp2: EP groups are single ranks.
  CHECK(p->of(GroupKind::kEp).size == 1);
  CHECK(p->of(GroupKind::kEp).span.gpus == 1);
  CHECK(p->of(GroupKind::kEdp).span.domains == 2);
  CheckAgainstRankMap(l, topo);
}

TEST_CASE("an EP group of 64 straddles NVL72 racks unless packed") {
  // 2 racks (144 GPUs), world 128, ep64: linear puts ranks 64..127 on GPUs
  // 64..127, so the second EP group has 8 ranks in rack 0 and 56 in rack 1.
  const Topology topo = MustBuild(Nvl72(2, 36));
  const Layout linear = DegreesLayout(1, 1, 1, 128, 64, 1);
  Result<LayoutPlacement> p = PlaceGroups(linear, topo);
  REQUIRE(p.ok());
  const GroupSpan& ep = p->of(GroupKind::kEp).span;
  CHECK(ep.domains == 2);
  CHECK(ep.min_per_domain == 8);
  CHECK(ep.max_per_domain == 56);
  // 4 GPUs per node, one EP group's 4 ranks per node: one group per node's NICs.
  CHECK(p->of(GroupKind::kEp).groups_sharing_links == 1);
  CheckAgainstRankMap(linear, topo);

  // Packed: one 64-rank block per rack, 8 GPUs of each rack idle.
  Layout packed = linear;
  packed.placement = Placement::kPacked;
  Result<LayoutPlacement> q = PlaceGroups(packed, topo);
  REQUIRE(q.ok());
  CHECK(q->of(GroupKind::kEp).span.inside_one_domain);
  CHECK(q->of(GroupKind::kEdp).span.domains == 2);
  CheckAgainstRankMap(packed, topo);

  // Packed ep48 keeps one 48-rank block per 72-GPU rack: 144 ranks need 3
  // racks, the cluster has 2.
  const Layout too_big = DegreesLayout(1, 1, 1, 144, 48, 1, kDefaultOrder, Placement::kPacked);
  Result<LayoutPlacement> refused = PlaceGroups(too_big, topo);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("needs 216 GPUs") != std::string::npos);
  CHECK_FALSE(BuildRankMap(too_big, topo.cluster()).ok());
}

TEST_CASE("errors match the rank map's") {
  const Topology topo = MustBuild(DgxSu(2));
  const Layout pp_before_dp = DegreesLayout(2, 2, 1, 4, 2, 1, "tp-cp-ep-pp-dp");  // edp 4 == dp 4: legal
  CHECK(PlaceGroups(pp_before_dp, topo).ok());
  const Layout pp_stride = DegreesLayout(2, 2, 1, 4, 4, 1, "tp-cp-ep-pp-dp");  // edp 2 != dp 4
  CHECK_FALSE(PlaceGroups(pp_stride, topo).ok());
  CHECK_FALSE(BuildRankMap(pp_stride, topo.cluster()).ok());
  const Layout too_big = DegreesLayout(1, 8, 1, 4, 1, 8);  // 32 ranks on 16 GPUs
  CHECK_FALSE(PlaceGroups(too_big, topo).ok());
  const Layout unknown = DegreesLayout(1, 2, 1, 8, 2, 1, "tp-cp-xx-dp-pp");
  CHECK_FALSE(PlaceGroups(unknown, topo).ok());
}

// Orders Megatron accepts (each a distinct rank map).
const std::vector<std::string> kMegatronOrders = {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-ep-cp-dp-pp",
                                          "cp-tp-ep-dp-pp", "tp-dp-cp-ep-pp", "ep-tp-cp-dp-pp"};

TEST_CASE("PlaceGroups equals the rank map's worst groups (property, seeded)") {
  std::mt19937 rng(424242);
  struct Case {
    ClusterSpec cluster;
    std::vector<int> worlds;
  };
  const Case cases[] = {
      // 16 DGX nodes in SUs of 4 (the spine matters), worlds full and partial.
      {DgxSu(16, 4), {128, 64, 96, 48}},
      // 4 NVL72 racks in SUs of 18 nodes (one rack each) and 27 (SU boundaries
      // inside racks), 72-GPU domains that 2^k blocks do not fill.
      {Nvl72(4, 18), {288, 256, 128, 192, 144}},
      {Nvl72(4, 27), {288, 256, 216}},
      // SUs smaller than a domain (9 nodes = 36 GPUs: racks straddle SUs),
      // and DGX SUs of 3 nodes (no power of two anywhere).
      {Nvl72(4, 9), {288, 144, 96}},
      {DgxSu(24, 3), {192, 96, 144}},
      // 64 DGX nodes, SUs of 8: periods smaller than the world.
      {DgxSu(64, 8), {512, 256, 384}},
  };
  int checked = 0;
  for (const Case& c : cases) {
    const Topology topo = MustBuild(c.cluster);
    for (int world : c.worlds) {
      for (int trial = 0; trial < 40; ++trial) {
        CheckAgainstRankMap(RandomLayout(world, kMegatronOrders, rng), topo);
        ++checked;
      }
    }
  }
  CHECK(checked == 40 * 21);
}

TEST_CASE("large groups on a large cluster: split offsets agree with the rank map") {
  // 2048 GPUs in 8 SUs: DP groups of 256 whose strides cross every period.
  const Topology topo = MustBuild(DgxSu(256, 32));
  CheckAgainstRankMap(DegreesLayout(8, 1, 1, 256, 8, 1), topo);
  CheckAgainstRankMap(DegreesLayout(8, 1, 1, 256, 8, 1, "tp-cp-ep-pp-dp"), topo);
  CheckAgainstRankMap(DegreesLayout(4, 2, 2, 128, 16, 1, kDefaultOrder, Placement::kPacked), topo);
  CheckAgainstRankMap(DegreesLayout(16, 4, 1, 32, 32, 1), topo);
  CheckAgainstRankMap(DegreesLayout(1, 1, 1, 2048, 64, 1), topo);
  CheckAgainstRankMap(DegreesLayout(2, 1, 8, 128, 16, 2, "tp-cp-ep-pp-dp"), topo);
}

}  // namespace
}  // namespace foldplan
