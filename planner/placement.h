// Physical placement of logical ranks on the cluster's GPUs (doc/folding.md
// section 5). Linear: rank r on GPU r, as launchers do by default. Packed:
// the ranks are cut into aligned blocks of B consecutive ranks, B the
// smallest block that holds every heavy group (tp, cp, tp_cp, ep, etp,
// tp_ep), and floor(D / B) whole blocks go into each NVLink domain of D GPUs
// (domains filled in order, GPUs of a domain in order); the rest of each
// domain stays idle, so no heavy group straddles two domains.
#pragma once

#include <vector>

#include "core/status.h"
#include "inputs/cluster.h"
#include "planner/layout.h"
#include "planner/rank_generator.h"
#include "planner/rank_map.h"
#include "topology/cluster_shape.h"

namespace foldplan {

// The smallest B dividing `world` such that every heavy group (IsHeavy) lies
// inside one aligned block [k*B, (k+1)*B). Computed from the groups
// themselves, so any order string works; `world` when nothing smaller does.
int HeavyBlockRanks(int world, const GroupSet& groups);
// The same for a built map.
int HeavyBlockRanks(const RankMap& map);

// Where GPU `gpu` of the cluster sits (node, local GPU, domain, rail).
PhysicalPlace PlaceOfGpu(int gpu, const ClusterShape& shape);

// GPU of every rank (PackBlocks in topology/cluster_shape.h). Packed with
// B > D falls back to linear (packing cannot help; Straddles() reports the
// damage). Errors: a cluster shape CheckClusterShape refuses, a world larger
// than the cluster, or a packed placement needing more GPUs than the cluster
// has (the message says how many it needs).
Result<std::vector<PhysicalPlace>> PlaceRanks(int world, Placement placement, int block_ranks,
                                              const ClusterSpec& cluster);

// The packed placement's fit, as PlaceRanks and group placement check it:
// an error (saying how many GPUs it needs) when `blocks`, PackBlocks of
// `world` ranks in blocks of `block_ranks`, packs and needs more GPUs than
// the cluster has.
Status CheckPackedFits(const PackedBlocks& blocks, int block_ranks, int world, const ClusterSpec& cluster);

// Heavy groups of `groups` touching more than one domain, given each rank's place.
std::vector<Straddle> FindStraddles(const GroupSet& groups, const std::vector<PhysicalPlace>& places);

}  // namespace foldplan
