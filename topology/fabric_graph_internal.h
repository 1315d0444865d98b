// The fabric as a Boost.Graph adjacency list, private to foldplan_topology
// (Boost types must not reach topology.h).
//
// Vertices: one per GPU; one per NVLink domain standing for its NVSwitch
// fabric; one NIC per node per rail; one leaf switch per rail per scalable
// unit; one spine vertex per rail (a spine plane) when there are two or more
// SUs. Undirected edges carry the per-GPU, per-direction bandwidth of the link
// and its share of the latency:
//   GPU - NVSwitch   nvlink_gb_per_s         nvlink_us / 2  (GPU-GPU = one NVLink hop)
//   GPU - NIC        NIC line rate           0              (PCIe, see below)
//   NIC - leaf       nic_gbit_per_s / 8      network_us / 2 (NIC-NIC via a leaf)
//   leaf - spine     NIC rate / oversub.     spine_us / 2   (one spine crossing)
// The GPU-NIC PCIe link is not modelled as a bottleneck: on DGX/HGX boards
// the PCIe switch gives each NIC a link sized for its line rate (NCCL's 48 GB/s
// Gen5 x16 figure is within a few percent of a 400 Gbit/s NIC), so the edge
// carries the NIC's rate and the NIC-leaf link is what binds. Its latency is
// inside network_us. The leaf-spine edge is the per-NIC share of a leaf's
// uplinks: all su_nodes NICs of a rail share them, so each gets
// (NIC rate) / spine_oversubscription when all send at once.
#pragma once

#include <cstdint>

#include <boost/graph/adjacency_list.hpp>

#include "inputs/cluster.h"
#include "topology/fabric_shape_internal.h"
#include "topology/topology.h"

namespace foldplan::topology_internal {

enum class VertexKind : std::uint8_t { kGpu, kNvswitch, kNic, kLeaf, kSpine };
enum class LinkKind : std::uint8_t { kNvlink, kPcie, kNicToLeaf, kLeafToSpine };

struct FabricVertex {
  VertexKind kind = VertexKind::kGpu;
};

struct FabricLink {
  LinkKind kind = LinkKind::kNvlink;
  double gb_per_s = 0;    // per GPU, per direction
  double latency_us = 0;  // this link's share of the hop latency
};

// Edges in a vector (not the default list): about half the memory and a
// faster Build for clusters of 10^5 GPUs; edges are never removed.
using FabricGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS,
                                          FabricVertex, FabricLink, boost::no_property,
                                          boost::vecS>;
using FabricVertexId = boost::graph_traits<FabricGraph>::vertex_descriptor;

// `cluster` must have passed validation; `shape` is FabricShape::Of(cluster).
FabricGraph BuildFabricGraph(const ClusterSpec& cluster, const FabricShape& shape);

// The routed path between two distinct valid GPUs, searched on the graph:
// the search may only use the vertices the routing allows (see graph.cc).
// Returns the bottleneck bandwidth, summed latency, switch hops, and the
// tier: spine if the path crosses a spine, network if it crosses a leaf,
// else nvlink.
TierInfo FindRoutedPath(const FabricGraph& graph, const FabricShape& shape, int gpu_a,
                        int gpu_b);

}  // namespace foldplan::topology_internal
