// The rank map drawn on the cluster: NVLink domains and nodes as boxes,
// every GPU a cell labelled with its rank and coloured by the rank's group
// of one kind (tp, cp, dp, ep, edp or pp), GPUs without a rank (a packed
// placement's leftovers, or a world smaller than the cluster) drawn as
// idle, and the ranks of heavy groups that straddle NVLink domains
// (RankMap::Straddles) outlined in red. A big cluster is cut to its first
// whole domains holding at most `max_gpus` GPUs, and the picture says so;
// the markup grows with the GPUs drawn only (about 300 bytes each).
// Rank cells carry data-rank="R", idle cells data-idle="GPU" (the browser test
// counts them).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "inputs/cluster.h"
#include "planner/rank_map.h"

namespace foldplan {

// The kinds a map can be coloured by, and their names.
inline constexpr GroupKind kColorKinds[6] = {GroupKind::kTp, GroupKind::kCp, GroupKind::kDp,
                                             GroupKind::kEp, GroupKind::kEdp, GroupKind::kPp};
std::optional<GroupKind> ColorKindNamed(std::string_view name);  // "tp" ... "pp", else nullopt
// The default: the largest heavy group of the layout (ep, tp, cp; ties in
// that order), whose placement decides NVLink traffic; dp when all are 1.
GroupKind DefaultColorKind(const Layout& layout);

struct RankMapPicture {
  std::string svg;
  int gpus_drawn = 0, gpus_total = 0;
  int nodes_drawn = 0, nodes_total = 0;
  int ranks_drawn = 0;  // ranks whose GPU was drawn
  std::vector<Straddle> straddles;  // every straddling heavy group of the map
  std::string note;  // "" or what was left out
};

RankMapPicture DrawRankMap(const RankMap& map, const ClusterSpec& cluster, GroupKind color_by,
                           int max_gpus = 1024);

}  // namespace foldplan
