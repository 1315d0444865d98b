// The rank map picture: every rank is drawn exactly once (a data-rank cell),
// every GPU without a rank is drawn idle, the ranks of straddling heavy
// groups are outlined, and a big cluster is cut to whole domains.
#include <doctest/doctest.h>

#include <string>

#include "planner/rank_map.h"
#include "report/rank_map_svg.h"
#include "fixtures.h"
#include "tests/text_count.h"

namespace foldplan {
namespace {

using foldplan::testing::Count;

// NVL72-like racks: 18 nodes x 4 GPUs per NVLink domain.
ClusterSpec Racks(int racks) {
  ClusterSpec c = testing::MakeCluster(18 * racks, 4, 72);
  c.nics_per_node = 4;
  return c;
}

// dp 128, ep 64 (edp 2) on 128 ranks.
Layout Ep64(Placement placement) {
  Layout l = testing::MakeLayout(128, 1, 1, 1, 64, 1);
  l.placement = placement;
  return l;
}

void CheckEveryRankOnce(const RankMapPicture& pic, int world) {
  for (int r = 0; r < world; ++r) {
    CAPTURE(r);
    CHECK(Count(pic.svg, "data-rank=\"" + std::to_string(r) + "\"") == 1);
  }
  CHECK(Count(pic.svg, "data-rank=") == static_cast<size_t>(world));
  CHECK(pic.ranks_drawn == world);
}

TEST_CASE("rank map: linear placement draws every rank once and the remaining GPUs idle") {
  // 128 ranks on 144 GPUs, rank r on GPU r: GPUs 128..143 are idle.
  Result<RankMap> map = BuildRankMap(Ep64(Placement::kLinear), Racks(2));
  REQUIRE_MESSAGE(map.ok(), map.status().message());
  const RankMapPicture pic = DrawRankMap(map.value(), Racks(2), GroupKind::kEp);
  CheckEveryRankOnce(pic, 128);
  CHECK(Count(pic.svg, "data-idle=") == 16);
  CHECK(Count(pic.svg, "data-idle=\"128\"") == 1);
  CHECK(Count(pic.svg, "class=\"domain\"") == 2);
  CHECK(Count(pic.svg, "class=\"node\"") == 36);
  // ep group 1 (ranks 64..127) has 8 ranks in rack 0 and 56 in rack 1: all
  // 64 of its ranks are outlined, none of group 0's.
  CHECK(Count(pic.svg, "class=\"straddle\"") == 64);
  CHECK(pic.note.empty());
}

TEST_CASE("rank map: packed placement draws every rank once, 8 idle GPUs per rack, nothing straddles") {
  // Blocks of 64 ranks, one per 72-GPU rack: GPUs 64..71 and 136..143 idle.
  Result<RankMap> map = BuildRankMap(Ep64(Placement::kPacked), Racks(2));
  REQUIRE_MESSAGE(map.ok(), map.status().message());
  const RankMapPicture pic = DrawRankMap(map.value(), Racks(2), GroupKind::kEp);
  CheckEveryRankOnce(pic, 128);
  CHECK(Count(pic.svg, "data-idle=") == 16);
  CHECK(Count(pic.svg, "data-idle=\"64\"") == 1);
  CHECK(Count(pic.svg, "data-idle=\"143\"") == 1);
  CHECK(Count(pic.svg, "class=\"straddle\"") == 0);
  // Cells are coloured by their ep group: two groups, two fills.
  CHECK(Count(pic.svg, "data-group=\"0\"") == 64);
  CHECK(Count(pic.svg, "data-group=\"1\"") == 64);
}

TEST_CASE("rank map: a big cluster is cut to whole domains under the GPU limit, and says so") {
  // 4,096 ranks on 512 nodes of 8 (a domain a node); at most 1,000 GPUs
  // drawn: 125 whole nodes, ranks 0..999.
  const ClusterSpec cluster = testing::MakeCluster(512);
  Result<RankMap> map = BuildRankMap(testing::MakeLayout(4096, 8, 1, 4, 8, 1), cluster);
  REQUIRE_MESSAGE(map.ok(), map.status().message());
  const RankMapPicture pic = DrawRankMap(map.value(), cluster, GroupKind::kTp, 1000);
  CHECK(pic.nodes_drawn == 125);
  CHECK(pic.ranks_drawn == 1000);
  CHECK(Count(pic.svg, "data-rank=") == 1000);
  CHECK(Count(pic.svg, "data-rank=\"999\"") == 1);
  CHECK(Count(pic.svg, "data-rank=\"1000\"") == 0);
  CHECK(pic.note == "showing the first 125 of 512 nodes (1000 of 4096 GPUs, 1000 of 4096 ranks)");
  // The markup is bounded by what is drawn (about 300 bytes a GPU), not by the world.
  CHECK(pic.svg.size() < 1000 * 450);
}

TEST_CASE("rank map: the default colour is the largest heavy group, dp when all are 1") {
  CHECK(DefaultColorKind(testing::MakeLayout(64, 2, 1, 1, 8, 1)) == GroupKind::kEp);
  CHECK(DefaultColorKind(testing::MakeLayout(64, 8, 2, 1, 4, 1)) == GroupKind::kTp);
  CHECK(DefaultColorKind(testing::MakeLayout(64, 2, 4, 1, 1, 1)) == GroupKind::kCp);
  CHECK(DefaultColorKind(testing::MakeLayout(64, 4, 1, 1, 4, 1)) == GroupKind::kEp);  // a tie: ep first
  CHECK(DefaultColorKind(testing::MakeLayout(64, 1, 1, 4, 1, 1)) == GroupKind::kDp);
  CHECK(ColorKindNamed("edp") == GroupKind::kEdp);
  CHECK_FALSE(ColorKindNamed("tp_ep").has_value());
}

}  // namespace
}  // namespace foldplan
