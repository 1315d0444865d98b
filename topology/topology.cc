// Topology: validation, the graph built once, spans of GPU sets.
#include "topology/topology.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>

#include "core/formats.h"
#include "topology/fabric_graph_internal.h"
#include "topology/fabric_shape_internal.h"

namespace foldplan {

using topology_internal::BuildFabricGraph;
using topology_internal::FabricGraph;
using topology_internal::FabricShape;
using topology_internal::FindRoutedPath;
using topology_internal::kPairClassCount;
using topology_internal::PairClass;

namespace {

// Below this many members an unsorted set is sorted; above it, deduplicated
// through a bitmap over all GPUs (a 16,384-GPU set then costs O(n + G/64)).
constexpr std::size_t kSortBelowMembers = 256;

// Every problem with the cluster, one per line, each naming the field.
Status Validate(const ClusterSpec& c) {
  std::vector<std::string> problems;
  auto problem = [&](const std::string& what) { problems.push_back(what); };
  auto num = [](double v) {
    std::ostringstream out;
    out << v;
    return out.str();
  };

  // The shape first (cluster_shape.h), then the rates.
  for (std::string& p : ClusterShapeProblems(c)) problem(p);
  if (!(std::isfinite(c.nvlink_gb_per_s) && c.nvlink_gb_per_s > 0)) {
    problem("nvlink_gb_per_s (" + num(c.nvlink_gb_per_s) + ") must be positive");
  }
  if (!(std::isfinite(c.nic_gbit_per_s) && c.nic_gbit_per_s > 0)) {
    problem("nic_gbit_per_s (" + num(c.nic_gbit_per_s) + ") must be positive");
  }
  if (!(std::isfinite(c.fabric.spine_oversubscription) && c.fabric.spine_oversubscription >= 1)) {
    problem("fabric.spine_oversubscription (" + num(c.fabric.spine_oversubscription) +
            ") must be at least 1");
  }
  const std::array<std::pair<const char*, double>, 3> latencies = {{
      {"latency.nvlink_us", c.latency.nvlink_us},
      {"latency.network_us", c.latency.network_us},
      {"latency.spine_us", c.latency.spine_us},
  }};
  for (const auto& [field, value] : latencies) {
    if (!(std::isfinite(value) && value >= 0)) {
      problem(std::string(field) + " (" + num(value) + ") must be zero or positive");
    }
  }
  return ClusterProblems(c, problems);
}

}  // namespace

const char* Name(LinkTier tier) {
  switch (tier) {
    case LinkTier::kNvlink: return "nvlink";
    case LinkTier::kNetwork: return "network";
    case LinkTier::kSpine: return "spine";
  }
  return "?";
}

struct Topology::Impl {
  // The graph is built in place: adjacency_list has no move assignment, and
  // a copy of a 10^5-GPU graph would double Build's time.
  explicit Impl(const ClusterSpec& spec)
      : cluster(spec), shape(FabricShape::Of(spec)), graph(BuildFabricGraph(spec, shape)) {}

  ClusterSpec cluster;
  FabricShape shape;
  FabricGraph graph;
  // PathBetween of each pair class's canonical pair, found once at Build: all
  // pairs of a class route alike (fabric_shape_internal.h), so Span reads
  // these instead of searching. Empty for classes the cluster has no pair of.
  std::array<std::optional<TierInfo>, kPairClassCount> path_by_class;

  const std::optional<TierInfo>& PathOfClass(PairClass pair_class) const {
    return path_by_class[static_cast<int>(pair_class)];
  }
};

Result<Topology> Topology::Build(const ClusterSpec& cluster) {
  if (Status status = Validate(cluster); !status.ok()) return status;
  auto impl = std::make_unique<Impl>(cluster);
  for (int c = 0; c < kPairClassCount; ++c) {
    if (auto pair = impl->shape.CanonicalPair(static_cast<PairClass>(c))) {
      impl->path_by_class[c] = FindRoutedPath(impl->graph, impl->shape, pair->first, pair->second);
    }
  }
  return Topology(std::move(impl));
}

Topology::Topology(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;
Topology::~Topology() = default;

const ClusterSpec& Topology::cluster() const { return impl_->cluster; }
int Topology::gpus() const { return impl_->shape.gpus; }

// Out-of-range GPUs have no node, domain, rail or SU: -1.
int Topology::node_of(int gpu) const {
  return impl_->shape.valid_gpu(gpu) ? impl_->shape.node_of(gpu) : -1;
}
int Topology::domain_of(int gpu) const {
  return impl_->shape.valid_gpu(gpu) ? impl_->shape.domain_of(gpu) : -1;
}
int Topology::rail_of(int gpu) const {
  return impl_->shape.valid_gpu(gpu) ? impl_->shape.rail_of(gpu) : -1;
}
int Topology::su_of(int gpu) const {
  return impl_->shape.valid_gpu(gpu) ? impl_->shape.su_of(gpu) : -1;
}

// A GPU to itself crosses no link: the NVLink tier with zero latency and
// hops, at the GPU's NVLink bandwidth (so that callers dividing by it stay
// finite). An out-of-range GPU gets an empty TierInfo (gb_per_s 0, which a
// caller must not divide by); the header asks callers not to pass one.
TierInfo Topology::PathBetween(int gpu_a, int gpu_b) const {
  const FabricShape& shape = impl_->shape;
  if (!shape.valid_gpu(gpu_a) || !shape.valid_gpu(gpu_b)) return TierInfo{LinkTier::kNvlink};
  if (gpu_a == gpu_b) return TierInfo{LinkTier::kNvlink, impl_->cluster.nvlink_gb_per_s, 0, 0};
  return FindRoutedPath(impl_->graph, shape, gpu_a, gpu_b);
}

TierInfo Topology::TierBetween(int gpu_a, int gpu_b, LinkTier tier) const {
  const std::optional<TierInfo>& path = impl_->PathOfClass(impl_->shape.ClassOf(gpu_a, gpu_b));
  if (!path) return TierInfo{tier};
  TierInfo info = *path;
  info.tier = tier;  // as Span labels it
  return info;
}

namespace {

// The members of `gpus` that are in range, ascending, without duplicates:
// `gpus` itself when it already is (the usual case), else `scratch`.
std::span<const int> SortedValidMembers(std::span<const int> gpus, int total_gpus,
                                        std::vector<int>& scratch) {
  bool clean = true;
  for (std::size_t i = 0; i < gpus.size() && clean; ++i) {
    clean = gpus[i] >= 0 && gpus[i] < total_gpus && (i == 0 || gpus[i - 1] < gpus[i]);
  }
  if (clean) return gpus;

  scratch.clear();
  for (int gpu : gpus) {
    if (gpu >= 0 && gpu < total_gpus) scratch.push_back(gpu);
  }
  if (scratch.size() < kSortBelowMembers) {
    std::sort(scratch.begin(), scratch.end());
    scratch.erase(std::unique(scratch.begin(), scratch.end()), scratch.end());
    return scratch;
  }
  std::vector<uint64_t> bits((static_cast<std::size_t>(total_gpus) + 63) / 64);
  for (int gpu : scratch) bits[gpu / 64] |= uint64_t{1} << (gpu % 64);
  scratch.clear();
  for (std::size_t word = 0; word < bits.size(); ++word) {
    for (uint64_t w = bits[word]; w != 0; w &= w - 1) {
      scratch.push_back(static_cast<int>(word * 64) + std::countr_zero(w));
    }
  }
  return scratch;
}

}  // namespace

// Out-of-range indices are ignored (not counted) and duplicates counted once.
//
// Representative pairs, read from members in GPU order (so node, domain and
// SU never decrease along it):
//  - nvlink: the first two consecutive members in one domain;
//  - network: the first two consecutive members in different domains of the
//    same SU (if any such pair exists, a consecutive one does, because SUs
//    and domains are contiguous ranges); else the first and last members,
//    whose path then crosses the spine. Its latency includes the PXN NVLink
//    hop exactly when that pair's rails differ;
//  - spine: the first and last members, which differ in domain and in SU
//    whenever any two members do.
// Members of different SUs but one domain (a domain straddling an SU
// boundary) talk over NVLink, so the spine tier needs both to differ.
GroupSpan Topology::Span(std::span<const int> gpus) const {
  const FabricShape& shape = impl_->shape;
  std::vector<int> scratch;
  const std::span<const int> members = SortedValidMembers(gpus, shape.gpus, scratch);

  GroupSpan span;
  if (members.empty()) return span;

  std::vector<char> rail_seen(shape.rails, 0);
  std::optional<std::pair<int, int>> nvlink_pair, network_pair;
  int prev_gpu = -1;
  // Node, domain and SU of the current member; recomputed only when a member
  // enters a new node (GPU order keeps a node's members together).
  int node = -1, domain = -1, su = -1;
  int node_end_gpu = 0;  // first GPU past the current node
  int in_domain = 0;     // members seen so far in the current domain
  span.min_per_domain = shape.gpus;
  auto close_domain = [&] {
    span.min_per_domain = std::min(span.min_per_domain, in_domain);
    span.max_per_domain = std::max(span.max_per_domain, in_domain);
  };

  for (int gpu : members) {
    bool same_domain = prev_gpu >= 0;
    if (gpu >= node_end_gpu) {
      node = shape.node_of(gpu);
      node_end_gpu = (node + 1) * shape.gpus_per_node;
      const int next_domain = shape.domain_of_node(node);
      const int next_su = shape.su_of_node(node);
      ++span.nodes;
      if (next_su != su) ++span.scalable_units;
      same_domain = next_domain == domain;
      if (!same_domain) {
        if (domain >= 0) {
          close_domain();
          if (next_su == su && !network_pair) network_pair = std::pair{prev_gpu, gpu};
        }
        ++span.domains;
        in_domain = 0;
      }
      domain = next_domain;
      su = next_su;
    }
    if (same_domain && !nvlink_pair) nvlink_pair = std::pair{prev_gpu, gpu};
    if (span.rails < shape.rails) {
      const int rail = shape.rail_of(gpu);
      if (!rail_seen[rail]) {
        rail_seen[rail] = 1;
        ++span.rails;
      }
    }
    ++in_domain;
    prev_gpu = gpu;
  }
  close_domain();

  const int first = members.front();
  const int last = members.back();
  span.gpus = static_cast<int>(members.size());
  span.inside_one_domain = span.domains == 1;
  span.crosses_spine =
      shape.domain_of(first) != shape.domain_of(last) && shape.su_of(first) != shape.su_of(last);
  if (span.domains >= 2 && !network_pair) network_pair = std::pair{first, last};

  auto add_tier = [&](LinkTier tier, const std::pair<int, int>& pair) {
    const std::optional<TierInfo>& path =
        impl_->PathOfClass(shape.ClassOf(pair.first, pair.second));
    assert(path && "a pair of this class exists, so Build found its path");
    if (!path) return;
    TierInfo info = *path;
    info.tier = tier;  // the network tier may be represented by a spine path
    span.tiers.push_back(info);
  };
  if (nvlink_pair) add_tier(LinkTier::kNvlink, *nvlink_pair);
  if (network_pair) add_tier(LinkTier::kNetwork, *network_pair);
  if (span.crosses_spine) add_tier(LinkTier::kSpine, std::pair{first, last});
  return span;
}

Topology::Counts Topology::counts() const {
  const FabricShape& shape = impl_->shape;
  Counts counts;
  counts.gpus = shape.gpus;
  counts.nvswitch_domains = shape.domains;
  counts.nics = shape.nodes * shape.rails;
  counts.leaf_switches = shape.scalable_units * shape.rails;
  counts.spine_switches = shape.spines;
  counts.vertices = static_cast<int>(boost::num_vertices(impl_->graph));
  counts.edges = static_cast<int>(boost::num_edges(impl_->graph));
  return counts;
}

}  // namespace foldplan
