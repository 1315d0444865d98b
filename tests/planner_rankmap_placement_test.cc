// Physical placement: linear and packed, straddles, idle GPUs, and where a
// GPU sits (node, local GPU, NVLink domain, rail).
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "planner/placement.h"
#include "planner/rank_map.h"

namespace foldplan {
namespace {

// GB200 NVL72-like: racks of 18 nodes x 4 GPUs share one NVLink domain.
ClusterSpec Nvl72Racks(int racks) {
  ClusterSpec c;
  c.name = "test-nvl72";
  c.nodes = 18 * racks;
  c.gpus_per_node = 4;
  c.nvlink_domain_gpus = 72;
  c.nics_per_node = 4;
  return c;
}

// dp 128, ep 64, etp 1 (edp 2) on 128 ranks.
Layout Ep64(Placement placement) {
  Layout l;
  l.world = 128;
  l.dp = 128;
  l.ep = 64;
  l.etp = 1;
  l.edp = 2;
  l.placement = placement;
  return l;
}

TEST_CASE("placement: NVL72, EP 64 linear straddles two racks") {
  Result<RankMap> m = BuildRankMap(Ep64(Placement::kLinear), Nvl72Racks(2));
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  CHECK(m->idle_gpus() == 16);
  const std::vector<Straddle> straddles = m->Straddles();
  // ep group 1 (ranks 64..127): 8 ranks in rack 0, 56 in rack 1. With
  // etp 1 the tp_ep group is the same set and straddles too.
  REQUIRE(straddles.size() == 2);
  CHECK(straddles[0].kind == GroupKind::kEp);
  CHECK(straddles[0].group_index == 1);
  CHECK(straddles[0].ranks_per_domain == std::vector<int>{8, 56});
  CHECK(straddles[1].kind == GroupKind::kTpEp);
  CHECK(straddles[1].ranks_per_domain == std::vector<int>{8, 56});
  // Linear: rank r on GPU r.
  CHECK(m->place(100).gpu == 100);
  CHECK(m->place(100).node == 25);
  CHECK(m->place(100).local_gpu == 0);
  CHECK(m->place(100).domain == 1);
  CHECK(m->place(100).rail == 0);
}

TEST_CASE("placement: NVL72, EP 64 packed leaves 8 GPUs idle per rack and straddles nothing") {
  Result<RankMap> m = BuildRankMap(Ep64(Placement::kPacked), Nvl72Racks(2));
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  CHECK(HeavyBlockRanks(*m) == 64);
  CHECK(m->Straddles().empty());
  CHECK(m->idle_gpus() == 16);
  std::map<int, int> ranks_per_domain;
  for (int r = 0; r < m->world(); ++r) ++ranks_per_domain[m->place(r).domain];
  CHECK(ranks_per_domain == std::map<int, int>{{0, 64}, {1, 64}});  // 72 - 64 = 8 idle in each
  // Rank 64 opens rack 1: GPU 72, node 18, local GPU 0.
  CHECK(m->place(64).gpu == 72);
  CHECK(m->place(64).node == 18);
  CHECK(m->place(64).local_gpu == 0);
  CHECK(m->place(127).gpu == 135);
  CHECK(m->place(127).local_gpu == 3);
  CHECK(m->place(127).rail == 3);
}

TEST_CASE("placement: packing that needs more racks than the cluster has is an error") {
  // 576 ranks fill 8 racks of 72 GPUs linearly; packed, blocks of 64 leave 8
  // GPUs of each rack idle, so 576 / 64 = 9 racks = 648 GPUs are needed.
  Layout l = Ep64(Placement::kLinear);
  l.world = l.dp = 576;
  l.edp = 9;
  CHECK(BuildRankMap(l, Nvl72Racks(8)).ok());
  l.placement = Placement::kPacked;
  Result<RankMap> m = BuildRankMap(l, Nvl72Racks(8));
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().message().find("packed placement needs 648 GPUs") != std::string::npos);
}

TEST_CASE("placement: blocks larger than a domain keep the linear placement") {
  ClusterSpec dgx;
  dgx.name = "test-dgx";
  dgx.nodes = 4;
  Layout l;
  l.world = 32;
  l.dp = 32;
  l.ep = 16;
  l.edp = 2;
  l.placement = Placement::kPacked;
  Result<RankMap> m = BuildRankMap(l, dgx);
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  CHECK(HeavyBlockRanks(*m) == 16);
  for (int r = 0; r < 32; ++r) CHECK(m->place(r).gpu == r);
  CHECK(m->Straddles().size() == 4);  // 2 ep groups + 2 tp_ep groups, each 8 + 8
}

TEST_CASE("placement: the heavy block follows the groups, whatever the order") {
  ClusterSpec dgx;
  dgx.name = "test-dgx";
  dgx.nodes = 2;
  Layout l;  // worked example 3: tp4 dp4, ep4 etp2 edp2
  l.world = 16;
  l.tp = 4;
  l.dp = 4;
  l.ep = 4;
  l.etp = 2;
  l.edp = 2;
  Result<RankMap> m = BuildRankMap(l, dgx);
  REQUIRE(m.ok());
  CHECK(HeavyBlockRanks(*m) == 8);  // ep group [0, 2, 4, 6] and tp_ep [0..7]
  l.order = "tp-dp-pp-cp-ep";       // ep slowest: expert strides etp 1, edp 2, ep 4
  Result<RankMap> odd = BuildRankMap(l, dgx);
  REQUIRE_MESSAGE(odd.ok(), odd.status().message());
  // Expert view: etp stride 1, edp stride 2, ep stride 4: ep groups {y + 2e + 4x}, span 13 -> block 16.
  CHECK(HeavyBlockRanks(*odd) == 16);
  CHECK(odd->Straddles().size() > 0);
}

TEST_CASE("placement: cluster shape errors") {
  ClusterSpec c;
  c.name = "bad";
  c.nvlink_domain_gpus = 12;  // not whole 8-GPU nodes
  Layout l;
  l.world = 8;
  l.dp = 8;
  l.edp = 8;
  Result<RankMap> m = BuildRankMap(l, c);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().message() == "cluster bad: nvlink_domain_gpus (12) is not a multiple of gpus_per_node (8)");
}

TEST_CASE("placement: names") {
  CHECK(std::string(Name(Placement::kLinear)) == "linear");
  CHECK(std::string(Name(Placement::kPacked)) == "packed");
  CHECK(std::string(Name(GroupKind::kDpCp)) == "dp_cp");
  CHECK(std::string(Name(GroupKind::kTpEpPp)) == "tp_ep_pp");
  CHECK(std::string(Name(GroupKind::kPositionEmbedding)) == "position_embedding");
  int heavy = 0;
  for (int k = 0; k < kGroupKindCount; ++k) heavy += IsHeavy(static_cast<GroupKind>(k)) ? 1 : 0;
  CHECK(heavy == 6);
  CHECK(IsHeavy(GroupKind::kTpEp));
  CHECK_FALSE(IsHeavy(GroupKind::kDpCp));
}

}  // namespace
}  // namespace foldplan
