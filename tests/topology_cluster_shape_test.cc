// The cluster's index arithmetic (topology/cluster_shape.h): where a GPU
// sits, which shapes are refused, and how packed blocks fill domains.
#include <doctest/doctest.h>

#include "topology/cluster_shape.h"
#include "topology_fixtures.h"

namespace foldplan {
namespace {

using testing::DgxH100;
using testing::Nvl72;

TEST_CASE("a GPU's node, domain, rail and scalable unit on NVL72 racks") {
  // 4 racks of 18 nodes x 4 GPUs, 36 nodes per SU. GPU 150 = node 37
  // (150 / 4), local GPU 2, rail 2 % 4 = 2, domain 150 / 72 = 2, SU 37 / 36 = 1.
  const ClusterShape s = ClusterShape::Of(Nvl72(4));
  CHECK(s.gpus == 288);
  CHECK(s.domains == 4);
  CHECK(s.scalable_units == 2);
  CHECK(s.node_of(150) == 37);
  CHECK(s.local_of(150) == 2);
  CHECK(s.rail_of(150) == 2);
  CHECK(s.domain_of(150) == 2);
  CHECK(s.domain_of_node(37) == 2);
  CHECK(s.su_of(150) == 1);
  CHECK(s.su_gpus() == 144);
  CHECK_FALSE(s.single_su());
  CHECK(ClusterShape::Of(Nvl72(2)).single_su());  // 36 nodes: one SU
}

TEST_CASE("rails and PXN relays when NICs serve several GPUs") {
  // 8 GPUs, 4 NICs: local GPU 6 uses rail 6 % 4 = 2; its relay on rail 1 is
  // local GPU 5 (same block of 4 local GPUs), so GPU 8 + 5 = 13 on node 1.
  ClusterSpec c = DgxH100(2);
  c.nics_per_node = 4;
  const ClusterShape s = ClusterShape::Of(c);
  CHECK(s.rail_of(14) == 2);
  CHECK(s.RelayOnRail(14, 1) == 13);
  CHECK(s.RelayOnRail(2, 3) == 3);
}

TEST_CASE("shapes that cannot describe a cluster name the field") {
  ClusterSpec c = DgxH100(16);
  c.name = "x";
  CHECK(CheckClusterShape(c).ok());
  c.nvlink_domain_gpus = 12;
  c.nics_per_node = 0;
  CHECK(CheckClusterShape(c).message() ==
        "cluster x: nics_per_node (0) must be at least 1\n"
        "cluster x: nvlink_domain_gpus (12) is not a multiple of gpus_per_node (8)");
  c = DgxH100(1 << 20);  // 2^23 GPUs, over the 2^20 of core/formats.h
  CHECK(ClusterShapeProblems(c).size() == 1);
}

TEST_CASE("packed blocks: whole blocks per domain, the rest idle") {
  // 256 ranks in blocks of 64 on 72-GPU domains: 1 block (64 ranks) per
  // domain, 256 / 64 = 4 domains = 288 GPUs; rank 64 starts domain 1 (GPU 72).
  const PackedBlocks p = PackBlocks(256, 64, 72);
  CHECK(p.packs);
  CHECK(p.ranks_per_domain == 64);
  CHECK(p.domains_needed == 4);
  CHECK(p.gpus_needed == 288);
  CHECK(p.gpu_of(63) == 63);
  CHECK(p.gpu_of(64) == 72);
  CHECK(p.gpu_of(255) == 3 * 72 + 63);
  CHECK(p.gpu_shift(128) == 144);
  // Blocks of 24 on 72: three blocks fill a domain, so nothing moves.
  CHECK(PackBlocks(96, 24, 72).gpu_of(80) == 80);
  // A block larger than a domain, or none: linear, one GPU per rank.
  const PackedBlocks linear = PackBlocks(256, 128, 72);
  CHECK_FALSE(linear.packs);
  CHECK(linear.gpus_needed == 256);
  CHECK(linear.gpu_of(100) == 100);
  CHECK_FALSE(PackBlocks(256, 0, 72).packs);
}

}  // namespace
}  // namespace foldplan
