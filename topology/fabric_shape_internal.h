// The fabric graph's vertex numbering and the classes of GPU pairs by the
// route between them, private to foldplan_topology and free of Boost; the
// cluster's index arithmetic itself is topology/cluster_shape.h.
#pragma once

#include <cstddef>
#include <optional>
#include <utility>

#include "inputs/cluster.h"
#include "topology/cluster_shape.h"

namespace foldplan::topology_internal {

// GPU pairs by route. Every node, rail and scalable unit is built alike, so
// all pairs of one class have paths of the same shape, bandwidth and latency.
enum class PairClass {
  kSameDomain,        // over the domain's NVSwitch
  kSameSuSameRail,    // NIC -> leaf -> NIC
  kSameSuCrossRail,   // PXN NVLink hop to the destination's rail, then as above
  kCrossSuSameRail,   // NIC -> leaf -> spine -> leaf -> NIC
  kCrossSuCrossRail,  // PXN NVLink hop, then as above
};
inline constexpr int kPairClassCount = 5;

// The cluster's shape (cluster_shape.h) with the graph's vertex numbering
// and the pair classes.
struct FabricShape : ClusterShape {
  // One spine vertex per rail (a spine plane), present only when there are
  // two or more scalable units: a single SU needs no spine.
  int spines = 0;

  // `cluster` must have passed validation.
  static FabricShape Of(const ClusterSpec& cluster) {
    FabricShape s;
    static_cast<ClusterShape&>(s) = ClusterShape::Of(cluster);
    s.spines = s.scalable_units >= 2 ? s.rails : 0;
    return s;
  }

  bool valid_gpu(int gpu) const { return gpu >= 0 && gpu < gpus; }

  // Vertex numbering: GPUs, then NVSwitch domains, NICs (node-major), leaf
  // switches (SU-major), spine planes.
  std::size_t gpu_vertex(int gpu) const { return static_cast<std::size_t>(gpu); }
  std::size_t nvswitch_vertex(int domain) const {
    return static_cast<std::size_t>(gpus) + static_cast<std::size_t>(domain);
  }
  std::size_t nic_vertex(int node, int rail) const {
    return nvswitch_vertex(domains) + static_cast<std::size_t>(node) * rails + rail;
  }
  std::size_t leaf_vertex(int su, int rail) const {
    return nic_vertex(nodes, 0) + static_cast<std::size_t>(su) * rails + rail;
  }
  std::size_t spine_vertex(int rail) const {
    return leaf_vertex(scalable_units, 0) + static_cast<std::size_t>(rail);
  }
  std::size_t vertex_count() const { return spine_vertex(spines); }

  PairClass ClassOf(int gpu_a, int gpu_b) const {
    if (domain_of(gpu_a) == domain_of(gpu_b)) return PairClass::kSameDomain;
    const bool same_rail = rail_of(gpu_a) == rail_of(gpu_b);
    if (su_of(gpu_a) == su_of(gpu_b)) {
      return same_rail ? PairClass::kSameSuSameRail : PairClass::kSameSuCrossRail;
    }
    return same_rail ? PairClass::kCrossSuSameRail : PairClass::kCrossSuCrossRail;
  }

  // The first pair of the class in GPU order (the first GPU on rail 0, the
  // second on rail 0 or 1), or none when the cluster has no such pair.
  std::optional<std::pair<int, int>> CanonicalPair(PairClass pair_class) const {
    const bool cross_rail = pair_class == PairClass::kSameSuCrossRail ||
                            pair_class == PairClass::kCrossSuCrossRail;
    if (cross_rail && rails < 2) return std::nullopt;
    const int second_local = cross_rail ? 1 : 0;
    switch (pair_class) {
      case PairClass::kSameDomain:
        if (domain_gpus < 2) return std::nullopt;
        return std::pair{0, 1};
      case PairClass::kSameSuSameRail:
      case PairClass::kSameSuCrossRail:
        // Domain boundaries fall on multiples of nodes_per_domain; we need one
        // that is not also an SU boundary.
        for (int node = nodes_per_domain(); node < nodes; node += nodes_per_domain()) {
          if (su_of_node(node) == su_of_node(node - 1)) {
            return std::pair{(node - 1) * gpus_per_node, node * gpus_per_node + second_local};
          }
        }
        return std::nullopt;
      case PairClass::kCrossSuSameRail:
      case PairClass::kCrossSuCrossRail:
        // The first and last nodes differ in domain and SU whenever any pair does.
        if (domains < 2 || scalable_units < 2) return std::nullopt;
        return std::pair{0, (nodes - 1) * gpus_per_node + second_local};
    }
    return std::nullopt;
  }
};

}  // namespace foldplan::topology_internal
