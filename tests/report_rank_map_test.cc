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

// The compact map's group boundaries (its heavy edges).
std::string RankMapGroupEdges(const std::string& svg) {
  const size_t from = svg.find("class=\"group-edges\"");
  if (from == std::string::npos) return "";
  return svg.substr(from, svg.find("</g>", from) - from);
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
  const RankMapPicture pic = DrawRankMap(map.value(), Racks(2), MapColoring{false, GroupKind::kEp});
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
  const RankMapPicture pic = DrawRankMap(map.value(), Racks(2), MapColoring{false, GroupKind::kEp});
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
  // 4,096 ranks on 512 nodes of 8 (a domain a node); at most 500 GPUs
  // drawn: 62 whole nodes, ranks 0..495, a cell each (not compact).
  const ClusterSpec cluster = testing::MakeCluster(512);
  Result<RankMap> map = BuildRankMap(testing::MakeLayout(4096, 8, 1, 4, 8, 1), cluster);
  REQUIRE_MESSAGE(map.ok(), map.status().message());
  const RankMapPicture pic = DrawRankMap(map.value(), cluster, MapColoring{false, GroupKind::kTp}, 500);
  CHECK_FALSE(pic.compact);
  CHECK(pic.nodes_drawn == 62);
  CHECK(pic.ranks_drawn == 496);
  CHECK(Count(pic.svg, "data-rank=") == 496);
  CHECK(Count(pic.svg, "data-rank=\"495\"") == 1);
  CHECK(Count(pic.svg, "data-rank=\"496\"") == 0);
  CHECK(pic.note == "showing the first 62 of 512 nodes (496 of 4096 GPUs, 496 of 4096 ranks)");
  // The markup is bounded by what is drawn (about 300 bytes a GPU), not by the world.
  CHECK(pic.svg.size() < 496 * 450);
}

TEST_CASE("rank map: above 512 GPUs the map is compact, one cell per node, group boundaries outlined") {
  // 1,024 ranks on 128 nodes of 8, tp 8 ep 8: each node is one tp group.
  const ClusterSpec cluster = testing::MakeCluster(128);
  Result<RankMap> map = BuildRankMap(testing::MakeLayout(1024, 8, 1, 4, 8, 1), cluster);
  REQUIRE_MESSAGE(map.ok(), map.status().message());
  const RankMapPicture tp = DrawRankMap(map.value(), cluster, MapColoring{false, GroupKind::kTp});
  CHECK(tp.compact);
  CHECK(tp.ranks_drawn == 1024);
  CHECK(Count(tp.svg, "data-rank=") == 0);
  CHECK(Count(tp.svg, "data-node=") == 128);
  CHECK(Count(tp.svg, "data-ranks=\"8\"") == 128);
  // One stripe per node (a node is a tp group); rows of 32 nodes, every
  // pair of neighbours in a row differs: 31 boundaries per row, 4 rows.
  CHECK(Count(tp.svg, "data-group=") == 128);
  CHECK(Count(RankMapGroupEdges(tp.svg), "<line") == 4 * 31);
  // Not thousands of pixels: 4 rows of nodes.
  const size_t h = tp.svg.find("height=\"");
  REQUIRE(h != std::string::npos);
  CHECK(std::stod(tp.svg.substr(h + 8)) < 300);
  // Coloured by dp (strided by tp 8 inside a stage of 256 ranks): each
  // node holds 8 dp groups, a stripe each, and the 32 nodes of a stage
  // (a row) hold the same 8: no boundary inside a row.
  const RankMapPicture dp = DrawRankMap(map.value(), cluster, MapColoring{false, GroupKind::kDp});
  CHECK(Count(dp.svg, "data-group=") == 128 * 8);
  CHECK(Count(RankMapGroupEdges(dp.svg), "<line") == 0);
  // 512 GPUs drawn stay a cell per GPU.
  const RankMapPicture cut = DrawRankMap(map.value(), cluster, MapColoring{false, GroupKind::kTp}, 512);
  CHECK_FALSE(cut.compact);
  CHECK(Count(cut.svg, "data-rank=") == 512);
}

TEST_CASE("rank map: --color-by stage colours each rank by its pipeline stage, pp by its pp group") {
  // 64 ranks, tp 2 dp 8 pp 4: stage s is ranks 16s..16s+15 (pp outermost).
  const ClusterSpec cluster = testing::MakeCluster(8);
  Result<RankMap> map = BuildRankMap(testing::MakeLayout(64, 2, 1, 4, 8, 1), cluster);
  REQUIRE_MESSAGE(map.ok(), map.status().message());
  const std::optional<MapColoring> stage = ColoringNamed("stage");
  REQUIRE(stage.has_value());
  const RankMapPicture by_stage = DrawRankMap(map.value(), cluster, *stage);
  CHECK(by_stage.groups == 4);
  for (int r = 0; r < 64; ++r) {
    CAPTURE(r);
    const std::string cell = "data-rank=\"" + std::to_string(r) + "\" data-group=\"" +
                             std::to_string(map.value().coords(r).pp) + "\"";
    CHECK(Count(by_stage.svg, cell) == 1);
  }
  // pp groups are the 16 chains across the stages: rank r's pp group is r mod 16.
  const RankMapPicture by_pp = DrawRankMap(map.value(), cluster, *ColoringNamed("pp"));
  CHECK(by_pp.groups == 16);
  CHECK(Count(by_pp.svg, "data-rank=\"17\" data-group=\"1\"") == 1);
  CHECK(Count(by_stage.svg, "data-rank=\"17\" data-group=\"1\"") == 1);
  CHECK(Count(by_stage.svg, "data-rank=\"18\" data-group=\"1\"") == 1);
  CHECK(Count(by_pp.svg, "data-rank=\"18\" data-group=\"2\"") == 1);
  CHECK(Name(*stage) == "stage");
}

TEST_CASE("rank map: the default colour is the largest heavy group, dp when all are 1") {
  CHECK(DefaultColoring(testing::MakeLayout(64, 2, 1, 1, 8, 1)).kind == GroupKind::kEp);
  CHECK(DefaultColoring(testing::MakeLayout(64, 8, 2, 1, 4, 1)).kind == GroupKind::kTp);
  CHECK(DefaultColoring(testing::MakeLayout(64, 2, 4, 1, 1, 1)).kind == GroupKind::kCp);
  CHECK(DefaultColoring(testing::MakeLayout(64, 4, 1, 1, 4, 1)).kind == GroupKind::kEp);  // a tie: ep first
  CHECK(DefaultColoring(testing::MakeLayout(64, 1, 1, 4, 1, 1)).kind == GroupKind::kDp);
  CHECK_FALSE(DefaultColoring(testing::MakeLayout(64, 1, 1, 4, 1, 1)).stage);
  CHECK(ColoringNamed("edp") == MapColoring{false, GroupKind::kEdp});
  CHECK_FALSE(ColoringNamed("tp_ep").has_value());
}

}  // namespace
}  // namespace foldplan
