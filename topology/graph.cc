// Building the fabric graph and routing on it (fabric_graph_internal.h).
#include <algorithm>
#include <array>
#include <cassert>
#include <limits>
#include <unordered_map>

#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/pending/queue.hpp>
#include <boost/property_map/property_map.hpp>

#include "topology/fabric_graph_internal.h"

namespace foldplan::topology_internal {
namespace {

constexpr double kBitsPerByte = 8;

using FabricEdge = boost::graph_traits<FabricGraph>::edge_descriptor;

// The vertices a route may use. At most: source, its NVSwitch, the PXN relay,
// two NICs, two leaves and a spine, destination.
class RouteVertices {
 public:
  void Add(FabricVertexId v) {
    assert(size_ < kMaxVertices);
    vertices_[size_++] = v;
  }
  bool operator()(FabricVertexId v) const {
    return std::find(vertices_.begin(), vertices_.begin() + size_, v) !=
           vertices_.begin() + size_;
  }

 private:
  static constexpr int kMaxVertices = 9;
  std::array<FabricVertexId, kMaxVertices> vertices_{};
  int size_ = 0;
};

// The routing rule of topology.h as the set of vertices a path may use:
//  - same NVLink domain: over that domain's NVSwitch only;
//  - otherwise the traffic rides the destination's rail r (PXN): when the
//    source is on another rail it first crosses its own NVSwitch to the GPU of
//    its node on rail r; then NIC r of the source node, leaf r of the source
//    SU, [spine plane r, leaf r of the destination SU,] NIC r of the
//    destination node. NICs are never transit between GPUs, and no other
//    node's GPUs relay.
RouteVertices AllowedVertices(const FabricShape& shape, int gpu_a, int gpu_b) {
  RouteVertices allowed;
  allowed.Add(shape.gpu_vertex(gpu_a));
  allowed.Add(shape.gpu_vertex(gpu_b));
  if (shape.domain_of(gpu_a) == shape.domain_of(gpu_b)) {
    allowed.Add(shape.nvswitch_vertex(shape.domain_of(gpu_a)));
    return allowed;
  }
  const int rail = shape.rail_of(gpu_b);
  if (shape.rail_of(gpu_a) != rail) {
    allowed.Add(shape.nvswitch_vertex(shape.domain_of(gpu_a)));
    allowed.Add(shape.gpu_vertex(shape.RelayOnRail(gpu_a, rail)));
  }
  const int su_a = shape.su_of(gpu_a);
  const int su_b = shape.su_of(gpu_b);
  allowed.Add(shape.nic_vertex(shape.node_of(gpu_a), rail));
  allowed.Add(shape.leaf_vertex(su_a, rail));
  if (su_a != su_b) {
    allowed.Add(shape.spine_vertex(rail));
    allowed.Add(shape.leaf_vertex(su_b, rail));
  }
  allowed.Add(shape.nic_vertex(shape.node_of(gpu_b), rail));
  return allowed;
}

// Remembers, for each reached vertex, the edge it was reached by.
class ParentEdgeRecorder : public boost::default_bfs_visitor {
 public:
  explicit ParentEdgeRecorder(std::unordered_map<FabricVertexId, FabricEdge>* parent_edge)
      : parent_edge_(parent_edge) {}
  template <class Edge, class Graph>
  void tree_edge(Edge edge, const Graph& graph) const {
    (*parent_edge_)[boost::target(edge, graph)] = edge;
  }

 private:
  std::unordered_map<FabricVertexId, FabricEdge>* parent_edge_;
};

bool IsSwitch(VertexKind kind) {
  return kind == VertexKind::kNvswitch || kind == VertexKind::kLeaf ||
         kind == VertexKind::kSpine;
}

}  // namespace

FabricGraph BuildFabricGraph(const ClusterSpec& cluster, const FabricShape& shape) {
  FabricGraph graph(shape.vertex_count());
  auto set_kind = [&](std::size_t first, std::size_t end, VertexKind kind) {
    for (std::size_t v = first; v < end; ++v) graph[v].kind = kind;
  };
  set_kind(shape.gpu_vertex(0), shape.nvswitch_vertex(0), VertexKind::kGpu);
  set_kind(shape.nvswitch_vertex(0), shape.nic_vertex(0, 0), VertexKind::kNvswitch);
  set_kind(shape.nic_vertex(0, 0), shape.leaf_vertex(0, 0), VertexKind::kNic);
  set_kind(shape.leaf_vertex(0, 0), shape.spine_vertex(0), VertexKind::kLeaf);
  set_kind(shape.spine_vertex(0), shape.vertex_count(), VertexKind::kSpine);

  const double nic_gb_per_s = cluster.nic_gbit_per_s / kBitsPerByte;
  const FabricLink nvlink{LinkKind::kNvlink, cluster.nvlink_gb_per_s,
                          cluster.latency.nvlink_us / 2};
  const FabricLink pcie{LinkKind::kPcie, nic_gb_per_s, 0};
  const FabricLink nic_to_leaf{LinkKind::kNicToLeaf, nic_gb_per_s,
                               cluster.latency.network_us / 2};
  const FabricLink leaf_to_spine{LinkKind::kLeafToSpine,
                                 nic_gb_per_s / cluster.fabric.spine_oversubscription,
                                 cluster.latency.spine_us / 2};

  for (int gpu = 0; gpu < shape.gpus; ++gpu) {
    boost::add_edge(shape.gpu_vertex(gpu), shape.nvswitch_vertex(shape.domain_of(gpu)), nvlink,
                    graph);
    boost::add_edge(shape.gpu_vertex(gpu),
                    shape.nic_vertex(shape.node_of(gpu), shape.rail_of(gpu)), pcie, graph);
  }
  for (int node = 0; node < shape.nodes; ++node) {
    for (int rail = 0; rail < shape.rails; ++rail) {
      boost::add_edge(shape.nic_vertex(node, rail),
                      shape.leaf_vertex(shape.su_of_node(node), rail), nic_to_leaf, graph);
    }
  }
  if (shape.spines > 0) {
    for (int su = 0; su < shape.scalable_units; ++su) {
      for (int rail = 0; rail < shape.rails; ++rail) {
        boost::add_edge(shape.leaf_vertex(su, rail), shape.spine_vertex(rail), leaf_to_spine,
                        graph);
      }
    }
  }
  return graph;
}

TierInfo FindRoutedPath(const FabricGraph& graph, const FabricShape& shape, int gpu_a,
                        int gpu_b) {
  assert(shape.valid_gpu(gpu_a) && shape.valid_gpu(gpu_b) && gpu_a != gpu_b);
  // The allowed vertices form a single path on the graph, so breadth-first
  // search finds the same path a latency-weighted Dijkstra would, and visits
  // only the allowed vertices (no per-query work proportional to the graph).
  const boost::filtered_graph<FabricGraph, boost::keep_all, RouteVertices> route(
      graph, boost::keep_all(), AllowedVertices(shape, gpu_a, gpu_b));
  const FabricVertexId source = shape.gpu_vertex(gpu_a);
  const FabricVertexId target = shape.gpu_vertex(gpu_b);

  std::unordered_map<FabricVertexId, FabricEdge> parent_edge;
  std::unordered_map<FabricVertexId, boost::default_color_type> colors;
  boost::queue<FabricVertexId> queue;
  boost::breadth_first_visit(route, source, queue, ParentEdgeRecorder(&parent_edge),
                             boost::make_assoc_property_map(colors));

  TierInfo info{LinkTier::kNvlink, std::numeric_limits<double>::infinity(), 0, 0};
  if (!parent_edge.count(target)) {
    assert(false && "the routing rule left no path; fabric graph and rule disagree");
    return TierInfo{LinkTier::kNvlink, 0, 0, 0};
  }
  for (FabricVertexId v = target; v != source;) {
    const FabricEdge edge = parent_edge.at(v);
    const FabricLink& link = graph[edge];
    info.gb_per_s = std::min(info.gb_per_s, link.gb_per_s);
    info.latency_us += link.latency_us;
    v = boost::source(edge, graph);
    const VertexKind kind = graph[v].kind;
    if (IsSwitch(kind)) ++info.hops;
    if (kind == VertexKind::kSpine) info.tier = LinkTier::kSpine;
    if (kind == VertexKind::kLeaf && info.tier == LinkTier::kNvlink) info.tier = LinkTier::kNetwork;
  }
  return info;
}

}  // namespace foldplan::topology_internal
