// Index arithmetic of the fabric, private to foldplan_topology and free of
// Boost: which node, NVLink domain, rail and scalable unit a GPU is in, the
// vertex numbering of the fabric graph, and the classes of GPU pairs by the
// route between them.
#pragma once

#include <cstddef>
#include <optional>
#include <utility>

#include "inputs/cluster.h"

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

struct FabricShape {
  int gpus = 0;
  int gpus_per_node = 0;
  int nodes = 0;
  int domain_gpus = 0;
  int domains = 0;
  int rails = 0;           // NICs per node
  int su_nodes = 0;
  int scalable_units = 0;  // the last one may be partial
  // One spine vertex per rail (a spine plane), present only when there are
  // two or more scalable units: a single SU needs no spine.
  int spines = 0;

  // `cluster` must have passed validation.
  static FabricShape Of(const ClusterSpec& cluster) {
    FabricShape s;
    s.gpus_per_node = cluster.gpus_per_node;
    s.nodes = cluster.nodes;
    s.gpus = cluster.nodes * cluster.gpus_per_node;
    s.domain_gpus = cluster.nvlink_domain_gpus;
    s.domains = s.gpus / s.domain_gpus;
    s.rails = cluster.nics_per_node;
    s.su_nodes = cluster.fabric.su_nodes;
    s.scalable_units = (s.nodes + s.su_nodes - 1) / s.su_nodes;
    s.spines = s.scalable_units >= 2 ? s.rails : 0;
    return s;
  }

  bool valid_gpu(int gpu) const { return gpu >= 0 && gpu < gpus; }
  int node_of(int gpu) const { return gpu / gpus_per_node; }
  int local_of(int gpu) const { return gpu % gpus_per_node; }
  int domain_of(int gpu) const { return gpu / domain_gpus; }
  int rail_of(int gpu) const { return local_of(gpu) % rails; }
  int su_of_node(int node) const { return node / su_nodes; }
  int su_of(int gpu) const { return su_of_node(node_of(gpu)); }
  int nodes_per_domain() const { return domain_gpus / gpus_per_node; }

  // The GPU of `gpu`'s node that sits on `rail` and shares its block of
  // `rails` local GPUs (PXN relays there). Needs gpus_per_node % rails == 0.
  int RelayOnRail(int gpu, int rail) const {
    const int local = local_of(gpu);
    return node_of(gpu) * gpus_per_node + (local - local % rails) + rail;
  }

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
