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

Status CheckClusterShape(const ClusterSpec& c) {
  if (c.gpus_per_node < 1)
    return Status::Error("cluster " + c.name + ": gpus_per_node must be >= 1, found " + Str(c.gpus_per_node));
  if (c.nodes < 1) return Status::Error("cluster " + c.name + ": nodes must be >= 1, found " + Str(c.nodes));
  if (c.nvlink_domain_gpus < 1 || c.nvlink_domain_gpus % c.gpus_per_node != 0)
    return Status::Error("cluster " + c.name +
                         ": nvlink_domain_gpus must be a positive multiple of "
                         "gpus_per_node " +
                         Str(c.gpus_per_node) + ", found " + Str(c.nvlink_domain_gpus));
  if (c.nics_per_node < 1)
    return Status::Error("cluster " + c.name + ": nics_per_node must be >= 1, found " + Str(c.nics_per_node));
  return Status();
}

PhysicalPlace PlaceOfGpu(int gpu, const ClusterSpec& cluster) {
  PhysicalPlace place;
  place.gpu = gpu;
  place.node = gpu / cluster.gpus_per_node;
  place.local_gpu = gpu % cluster.gpus_per_node;
  place.domain = gpu / cluster.nvlink_domain_gpus;
  place.rail = place.local_gpu % cluster.nics_per_node;
  return place;
}

Result<std::vector<PhysicalPlace>> PlaceRanks(int world, Placement placement, int block_ranks,
                                              const ClusterSpec& cluster) {
  if (Status shape = CheckClusterShape(cluster); !shape.ok()) return shape;
  if (world > cluster.total_gpus())
    return Status::Error("world " + Str(world) + " ranks > " + Str(cluster.total_gpus()) +
                         " GPUs in cluster " + cluster.name);

  const int domain_gpus = cluster.nvlink_domain_gpus;
  // Packing with blocks larger than a domain cannot keep a block inside one:
  // stay linear and let Straddles() say which groups suffer.
  const bool pack = placement == Placement::kPacked && block_ranks >= 1 && block_ranks <= domain_gpus &&
                    world % block_ranks == 0;
  std::vector<PhysicalPlace> places;
  places.reserve(world);
  if (!pack) {
    for (int rank = 0; rank < world; ++rank) places.push_back(PlaceOfGpu(rank, cluster));
    return places;
  }

  const int blocks_per_domain = domain_gpus / block_ranks;
  const int ranks_per_domain = blocks_per_domain * block_ranks;
  const long long domains_needed = (world + ranks_per_domain - 1) / ranks_per_domain;
  const long long gpus_needed = domains_needed * domain_gpus;  // whole domains, as legality counts
  if (gpus_needed > cluster.total_gpus())
    return Status::Error("packed placement needs " + Str(gpus_needed) + " GPUs (" + Str(domains_needed) +
                         " NVLink domains of " + Str(domain_gpus) + " GPUs, " + Str(blocks_per_domain) +
                         " heavy blocks of " + Str(block_ranks) + " ranks each) for " + Str(world) +
                         " ranks, but cluster " + cluster.name + " has " + Str(cluster.total_gpus()));
  for (int rank = 0; rank < world; ++rank) {
    // Rank r is offset r % B in block r / B; block k goes to slot k % blocks_per_domain
    // of domain k / blocks_per_domain. Equivalently: ranks fill each domain's
    // first ranks_per_domain GPUs in order.
    const int domain = rank / ranks_per_domain;
    const int gpu = domain * domain_gpus + rank % ranks_per_domain;
    places.push_back(PlaceOfGpu(gpu, cluster));
  }
  return places;
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
