#include "topology/cluster_shape.h"

#include "core/formats.h"

namespace foldplan {

ClusterShape ClusterShape::Of(const ClusterSpec& c) {
  ClusterShape s;
  s.gpus_per_node = c.gpus_per_node;
  s.nodes = c.nodes;
  s.gpus = c.nodes * c.gpus_per_node;
  s.domain_gpus = c.nvlink_domain_gpus;
  s.domains = s.gpus / s.domain_gpus;
  s.rails = c.nics_per_node;
  s.su_nodes = c.fabric.su_nodes;
  s.scalable_units = (s.nodes + s.su_nodes - 1) / s.su_nodes;
  s.per_node_ = Divider(s.gpus_per_node);
  s.per_domain_ = Divider(s.domain_gpus);
  s.per_domain_nodes_ = Divider(s.nodes_per_domain());
  s.per_su_nodes_ = Divider(s.su_nodes);
  return s;
}

std::vector<std::string> ClusterShapeProblems(const ClusterSpec& c) {
  std::vector<std::string> problems;
  auto problem = [&](const std::string& what) { problems.push_back(what); };
  auto str = [](int64_t v) { return std::to_string(v); };
  if (c.nodes < 1) problem("nodes (" + str(c.nodes) + ") must be at least 1");
  if (c.gpus_per_node < 1) problem("gpus_per_node (" + str(c.gpus_per_node) + ") must be at least 1");
  if (c.nvlink_domain_gpus < 1)
    problem("nvlink_domain_gpus (" + str(c.nvlink_domain_gpus) + ") must be at least 1");
  if (c.nics_per_node < 1) problem("nics_per_node (" + str(c.nics_per_node) + ") must be at least 1");
  if (c.fabric.su_nodes < 1) problem("fabric.su_nodes (" + str(c.fabric.su_nodes) + ") must be at least 1");
  // Relations between counts, only once the counts themselves are sane.
  if (c.nodes < 1 || c.gpus_per_node < 1) return problems;
  const int64_t total = int64_t{c.nodes} * c.gpus_per_node;
  if (total > kMaxWorldSize) {
    problem("nodes x gpus_per_node (" + str(c.nodes) + " x " + str(c.gpus_per_node) + " = " + str(total) +
            " GPUs) exceeds the supported " + str(kMaxWorldSize));
  } else if (c.nvlink_domain_gpus >= 1) {
    if (c.nvlink_domain_gpus % c.gpus_per_node != 0) {
      problem("nvlink_domain_gpus (" + str(c.nvlink_domain_gpus) + ") is not a multiple of gpus_per_node (" +
              str(c.gpus_per_node) + ")");
    } else if (total % c.nvlink_domain_gpus != 0) {
      problem("nvlink_domain_gpus (" + str(c.nvlink_domain_gpus) + ") does not divide the cluster's " +
              str(total) + " GPUs (" + str(c.nodes) + " nodes x " + str(c.gpus_per_node) + ")");
    }
  }
  if (c.nics_per_node >= 1 && c.gpus_per_node % c.nics_per_node != 0) {
    problem("nics_per_node (" + str(c.nics_per_node) + ") does not divide gpus_per_node (" +
            str(c.gpus_per_node) + "): every rail must serve the same number of GPUs");
  }
  return problems;
}

std::string ClusterLabel(const ClusterSpec& cluster) {
  if (!cluster.name.empty()) return cluster.name;
  if (!cluster.source.empty()) return cluster.source;
  return "(unnamed)";
}

Status CheckClusterShape(const ClusterSpec& cluster) {
  return ClusterProblems(cluster, ClusterShapeProblems(cluster));
}

Status ClusterProblems(const ClusterSpec& cluster, const std::vector<std::string>& problems) {
  if (problems.empty()) return Status();
  std::string message;
  for (const std::string& p : problems) {
    if (!message.empty()) message += '\n';
    message += "cluster " + ClusterLabel(cluster) + ": " + p;
  }
  return Status::Error(message);
}

PackedBlocks PackBlocks(int world, int block_ranks, int domain_gpus) {
  PackedBlocks p;
  p.domain_gpus = domain_gpus;
  p.ranks_per_domain = domain_gpus;
  p.packs = block_ranks >= 1 && block_ranks <= domain_gpus && world >= 1 && world % block_ranks == 0;
  if (p.packs) {
    p.ranks_per_domain = domain_gpus / block_ranks * block_ranks;
    p.domains_needed = (int64_t{world} + p.ranks_per_domain - 1) / p.ranks_per_domain;
    p.gpus_needed = p.domains_needed * domain_gpus;
  } else {
    p.gpus_needed = world;
  }
  p.per_domain_ = Divider(p.ranks_per_domain);
  return p;
}

}  // namespace foldplan
