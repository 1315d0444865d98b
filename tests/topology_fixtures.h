// Clusters built in code for topology and communication tests, and a
// Topology::Build that fails the test on error.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "inputs/cluster.h"
#include "topology/topology.h"

namespace foldplan::testing {

// DGX H100: 8 GPUs on one NVSwitch fabric (450 GB/s per direction) and
// 8 NICs of 400 Gbit/s per node; latencies at their defaults (NVLink hop
// 0.6 us, NIC to NIC through a leaf 3.0 us, spine crossing +1.0 us).
inline ClusterSpec DgxH100(int nodes, int su_nodes = 32, double spine_oversubscription = 1) {
  ClusterSpec c;
  c.name = "h100-dgx-" + std::to_string(nodes) + "n";
  c.gpu.name = "H100 SXM5";
  c.nodes = nodes;
  c.gpus_per_node = 8;
  c.nvlink_domain_gpus = 8;
  c.nvlink_gb_per_s = 450;
  c.nics_per_node = 8;
  c.nic_gbit_per_s = 400;
  c.fabric.su_nodes = su_nodes;
  c.fabric.spine_oversubscription = spine_oversubscription;
  return c;
}

// GB200 NVL72: racks of 18 nodes x 4 GPUs in one 72-GPU NVLink domain
// (900 GB/s per direction), 4 NICs of 400 Gbit/s per node.
inline ClusterSpec Nvl72(int racks, int su_nodes = 36) {
  ClusterSpec c;
  c.name = "gb200-nvl72-" + std::to_string(racks) + "r";
  c.gpu.name = "B200";
  c.nodes = 18 * racks;
  c.gpus_per_node = 4;
  c.nvlink_domain_gpus = 72;
  c.nvlink_gb_per_s = 900;
  c.nics_per_node = 4;
  c.nic_gbit_per_s = 400;
  c.fabric.su_nodes = su_nodes;
  return c;
}

inline Topology MustBuild(const ClusterSpec& cluster) {
  Result<Topology> topo = Topology::Build(cluster);
  REQUIRE_MESSAGE(topo.ok(), topo.status().message());
  return std::move(topo).value();
}

}  // namespace foldplan::testing
