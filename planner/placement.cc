#include "planner/placement.h"

#include <algorithm>
#include <map>
#include <string>

namespace foldplan {

const char* Name(Placement p) {
  switch (p) {
    case Placement::kLinear: return "linear";
    case Placement::kPacked: return "packed";
  }
  return "?";
}

namespace {

// The heavy kinds (IsHeavy), in GroupKind order.
std::vector<GroupKind> HeavyKinds() {
  std::vector<GroupKind> kinds;
  for (int k = 0; k < kGroupKindCount; ++k)
    if (IsHeavy(static_cast<GroupKind>(k))) kinds.push_back(static_cast<GroupKind>(k));
  return kinds;
}

// Every heavy group sits in one aligned block of `block` ranks.
bool HeavyGroupsFitBlocks(const GroupSet& groups, int block) {
  for (GroupKind kind : HeavyKinds()) {
    for (const std::vector<int>& group : groups[static_cast<int>(kind)]) {
      const auto [lo, hi] = std::minmax_element(group.begin(), group.end());
      if (*lo / block != *hi / block) return false;
    }
  }
  return true;
}

std::string Str(long long v) { return std::to_string(v); }

}  // namespace

int HeavyBlockRanks(int world, const GroupSet& groups) {
  for (int block = 1; block < world; ++block)
    if (world % block == 0 && HeavyGroupsFitBlocks(groups, block)) return block;
  return std::max(world, 1);
}

int HeavyBlockRanks(const RankMap& map) {
  GroupSet groups;
  for (int k = 0; k < kGroupKindCount; ++k) groups[k] = map.groups(static_cast<GroupKind>(k));
  return HeavyBlockRanks(map.world(), groups);
}

PhysicalPlace PlaceOfGpu(int gpu, const ClusterShape& shape) {
  PhysicalPlace place;
  place.gpu = gpu;
  place.node = shape.node_of(gpu);
  place.local_gpu = shape.local_of(gpu);
  place.domain = shape.domain_of(gpu);
  place.rail = shape.rail_of(gpu);
  return place;
}

Result<std::vector<PhysicalPlace>> PlaceRanks(int world, Placement placement, int block_ranks,
                                              const ClusterSpec& cluster) {
  if (Status shape = CheckClusterShape(cluster); !shape.ok()) return shape;
  if (world > cluster.total_gpus())
    return Status::Error("world " + Str(world) + " ranks > " + Str(cluster.total_gpus()) +
                         " GPUs in cluster " + cluster.name);
  const ClusterShape shape = ClusterShape::Of(cluster);
  // Packing with blocks larger than a domain cannot keep a block inside one:
  // stay linear and let Straddles() say which groups suffer.
  const PackedBlocks blocks =
      PackBlocks(world, placement == Placement::kPacked ? block_ranks : 0, cluster.nvlink_domain_gpus);
  if (Status fits = CheckPackedFits(blocks, block_ranks, world, cluster); !fits.ok()) return fits;
  std::vector<PhysicalPlace> places;
  places.reserve(world);
  for (int rank = 0; rank < world; ++rank) places.push_back(PlaceOfGpu(blocks.gpu_of(rank), shape));
  return places;
}

Status CheckPackedFits(const PackedBlocks& blocks, int block_ranks, int world, const ClusterSpec& cluster) {
  if (!blocks.packs || blocks.gpus_needed <= cluster.total_gpus()) return Status();
  return Status::Error("packed placement needs " + Str(blocks.gpus_needed) + " GPUs (" +
                       Str(blocks.domains_needed) + " NVLink domains of " + Str(blocks.domain_gpus) +
                       " GPUs, " + Str(blocks.ranks_per_domain / block_ranks) + " heavy blocks of " +
                       Str(block_ranks) + " ranks each) for " + Str(world) + " ranks, but cluster " +
                       cluster.name + " has " + Str(cluster.total_gpus()));
}

std::vector<Straddle> FindStraddles(const GroupSet& groups, const std::vector<PhysicalPlace>& places) {
  std::vector<Straddle> out;
  for (GroupKind kind : HeavyKinds()) {
    const Groups& list = groups[static_cast<int>(kind)];
    for (size_t g = 0; g < list.size(); ++g) {
      std::map<int, int> per_domain;  // domain -> ranks, in domain order
      for (int rank : list[g]) ++per_domain[places[rank].domain];
      if (per_domain.size() <= 1) continue;
      Straddle s{kind, static_cast<int>(g), {}};
      for (const auto& [domain, count] : per_domain) s.ranks_per_domain.push_back(count);
      out.push_back(std::move(s));
    }
  }
  return out;
}

std::vector<Straddle> RankMap::Straddles() const { return FindStraddles(groups_, places_); }

}  // namespace foldplan
