// The rank map drawn on the cluster: NVLink domains and nodes as boxes,
// every GPU a cell labelled with its rank and coloured by the rank's group
// of one kind or its pipeline stage (MapColoring), GPUs without a rank (a packed
// placement's leftovers, or a world smaller than the cluster) drawn as
// idle, and the ranks of heavy groups that straddle NVLink domains
// (RankMap::Straddles) outlined in red. A big cluster is cut to its first
// whole domains holding at most `max_gpus` GPUs, and the picture says so;
// the markup grows with the GPUs drawn only (about 300 bytes each).
// Rank cells carry data-rank="R", idle cells data-idle="GPU" (the browser test
// counts them); a compact map's node cells data-node="N" data-ranks="K" (K
// ranks on it), its stripes data-group="G".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "inputs/cluster.h"
#include "planner/rank_map.h"

namespace foldplan {

// What the cells are coloured by: the groups of one kind (tp, cp, dp, ep,
// edp, or pp: each pp group is the ranks that hand one micro-batch's
// activations from stage to stage), or the pipeline stage (a rank's pp
// coordinate: the ranks holding the same layers share a colour).
struct MapColoring {
  bool stage = false;
  GroupKind kind = GroupKind::kDp;  // when not by stage
  bool operator==(const MapColoring&) const = default;
};
// The names --color-by takes, in the order help lists them.
inline constexpr const char* kColoringNames[7] = {"tp", "cp", "dp", "ep", "edp", "pp", "stage"};
std::optional<MapColoring> ColoringNamed(std::string_view name);  // one of kColoringNames, else nullopt
std::string Name(const MapColoring& coloring);
// The default: the largest heavy group of the layout (ep, tp, cp; ties in
// that order), whose placement decides NVLink traffic; dp when all are 1.
MapColoring DefaultColoring(const Layout& layout);

// Above this many GPUs drawn the map is compact: one cell per node, filled
// with the colours of the groups on it (a stripe each), the edges between
// nodes of different groups drawn heavy, so group boundaries show as
// outlines and 1,024 GPUs take a few rows rather than thousands of pixels.
inline constexpr int kCompactMapAboveGpus = 512;

struct RankMapPicture {
  std::string svg;
  int gpus_drawn = 0, gpus_total = 0;
  int nodes_drawn = 0, nodes_total = 0;
  int ranks_drawn = 0;  // ranks whose GPU was drawn
  bool compact = false;   // one cell per node (kCompactMapAboveGpus)
  int groups = 0;         // groups (or stages) coloured
  std::vector<Straddle> straddles;  // every straddling heavy group of the map
  std::string note;  // "" or what was left out
};

RankMapPicture DrawRankMap(const RankMap& map, const ClusterSpec& cluster, const MapColoring& color_by,
                           int max_gpus = 1024);

}  // namespace foldplan
