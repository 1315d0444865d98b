// The cluster's shape as index arithmetic, free of Boost: which node, NVLink
// domain, rail and scalable unit (SU) a GPU is in, whether the shape fields
// can describe a cluster at all, and how a packed placement fills NVLink
// domains with whole blocks of ranks. The one home of this arithmetic for
// the topology graph (topology/), the planner's rank placement
// (planner/placement.h) and group spans (planner/group_placement.h).
//
// GPUs are numbered node-major: GPU g is local GPU g % gpus_per_node of
// node g / gpus_per_node; an NVLink domain is nvlink_domain_gpus / gpus_per_node
// consecutive nodes; local GPU l uses NIC (rail) l % nics_per_node; a
// scalable unit is su_nodes consecutive nodes (the last one may be partial).
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "inputs/cluster.h"

namespace foldplan {

// Division of non-negative ints by a divisor fixed per cluster: a shift when
// it is a power of two (GPUs per node, domains and SUs usually are), for the
// hot loops of group placement.
class Divider {
 public:
  explicit Divider(int divisor = 1)
      : divisor_(divisor),
        shift_(std::has_single_bit(static_cast<unsigned>(divisor))
                   ? std::countr_zero(static_cast<unsigned>(divisor))
                   : -1) {}
  int operator()(int x) const { return shift_ >= 0 ? x >> shift_ : x / divisor_; }  // x >= 0

 private:
  int divisor_;
  int shift_;
};

struct ClusterShape {
  int gpus = 0;
  int gpus_per_node = 1;
  int nodes = 0;
  int domain_gpus = 1;      // GPUs per NVLink domain (whole nodes)
  int domains = 0;
  int rails = 1;            // NICs per node
  int su_nodes = 1;         // nodes per scalable unit
  int scalable_units = 0;   // the last one may be partial

  // `cluster` must pass CheckClusterShape.
  static ClusterShape Of(const ClusterSpec& cluster);

  int node_of(int gpu) const { return per_node_(gpu); }
  int local_of(int gpu) const { return gpu - node_of(gpu) * gpus_per_node; }
  int domain_of(int gpu) const { return per_domain_(gpu); }
  int domain_of_node(int node) const { return per_domain_nodes_(node); }
  int rail_of(int gpu) const { return local_of(gpu) % rails; }
  int su_of_node(int node) const { return per_su_nodes_(node); }
  int su_of(int gpu) const { return su_of_node(node_of(gpu)); }
  int nodes_per_domain() const { return domain_gpus / gpus_per_node; }
  int64_t su_gpus() const { return int64_t{su_nodes} * gpus_per_node; }
  // No scalable-unit boundary anywhere in the cluster.
  bool single_su() const { return scalable_units <= 1; }

  // The GPU of `gpu`'s node that sits on `rail` and shares its block of
  // `rails` local GPUs (PXN relays there). Needs gpus_per_node % rails == 0.
  int RelayOnRail(int gpu, int rail) const {
    const int local = local_of(gpu);
    return node_of(gpu) * gpus_per_node + (local - local % rails) + rail;
  }

 private:
  Divider per_node_, per_domain_, per_domain_nodes_, per_su_nodes_;
};

// Every problem with the cluster's shape fields (counts and how they
// divide each other, the size limit of core/formats.h), one line each
// naming the field; empty when the shape can describe a cluster.
std::vector<std::string> ClusterShapeProblems(const ClusterSpec& cluster);
// The same as one Status: "cluster NAME: problem", one line per problem.
Status CheckClusterShape(const ClusterSpec& cluster);
// `problems` of `cluster` as that Status (ok when there are none).
Status ClusterProblems(const ClusterSpec& cluster, const std::vector<std::string>& problems);
// "NAME", else the source file, else "(unnamed)": how messages name a cluster.
std::string ClusterLabel(const ClusterSpec& cluster);

// A packed placement (planner/placement.h): `world` ranks cut into aligned
// blocks of `block_ranks` consecutive ranks, as many whole blocks per NVLink
// domain as fit, domains filled in order, the rest of each domain idle.
struct PackedBlocks;
PackedBlocks PackBlocks(int world, int block_ranks, int domain_gpus);
struct PackedBlocks {
  // False when packing cannot apply (a block of 0 ranks, larger than a
  // domain, or not dividing the world): rank r then sits on GPU r.
  bool packs = false;
  int domain_gpus = 1;
  int ranks_per_domain = 1;  // floor(domain / block) x block when packing, else the domain
  int64_t domains_needed = 0;  // when packing (else 0)
  int64_t gpus_needed = 0;     // whole domains, idle GPUs included; the world when not packing

  // The GPU of `rank`: ranks fill each domain's first ranks_per_domain GPUs.
  int gpu_of(int rank) const {
    if (ranks_per_domain == domain_gpus) return rank;
    const int domain = per_domain_(rank);
    return domain * domain_gpus + (rank - domain * ranks_per_domain);
  }
  // The GPU shift of a rank shift that is a multiple of ranks_per_domain.
  int gpu_shift(int rank_shift) const { return rank_shift / ranks_per_domain * domain_gpus; }

 private:
  friend PackedBlocks PackBlocks(int world, int block_ranks, int domain_gpus);
  Divider per_domain_;
};

}  // namespace foldplan
