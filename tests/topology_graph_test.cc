// Topology::Build validation, graph sizes and PathBetween on the graph.
// Each test states the expected arithmetic, then asserts the number.
#include <string>

#include <doctest/doctest.h>

#include "topology/topology.h"
#include "topology_fixtures.h"

namespace foldplan {
namespace {

using testing::DgxH100;
using testing::MustBuild;
using testing::Nvl72;

std::string BuildError(const ClusterSpec& cluster) {
  Result<Topology> topo = Topology::Build(cluster);
  REQUIRE_FALSE(topo.ok());
  return topo.status().message();
}

TEST_CASE("tier names") {
  CHECK(std::string(Name(LinkTier::kNvlink)) == "nvlink");
  CHECK(std::string(Name(LinkTier::kNetwork)) == "network");
  CHECK(std::string(Name(LinkTier::kSpine)) == "spine");
}

TEST_CASE("graph counts: DGX H100, 16 nodes in one scalable unit") {
  const Topology topo = MustBuild(DgxH100(16));
  const Topology::Counts counts = topo.counts();
  // 16 nodes x 8 GPUs = 128 GPUs; one domain per node = 16 NVSwitch vertices;
  // 16 nodes x 8 rails = 128 NICs; 1 SU x 8 rails = 8 leaves; one SU: no spine.
  CHECK(topo.gpus() == 128);
  CHECK(counts.gpus == 128);
  CHECK(counts.nvswitch_domains == 16);
  CHECK(counts.nics == 128);
  CHECK(counts.leaf_switches == 8);
  CHECK(counts.spine_switches == 0);
  // 128 + 16 + 128 + 8 = 280 vertices.
  CHECK(counts.vertices == 280);
  // 128 GPU-NVSwitch + 128 GPU-NIC + 128 NIC-leaf = 384 edges.
  CHECK(counts.edges == 384);
}

TEST_CASE("graph counts: DGX H100, 16 nodes in two scalable units of 8") {
  const Topology topo = MustBuild(DgxH100(16, /*su_nodes=*/8));
  const Topology::Counts counts = topo.counts();
  // 2 SUs x 8 rails = 16 leaves; one spine plane per rail = 8 spines.
  CHECK(counts.leaf_switches == 16);
  CHECK(counts.spine_switches == 8);
  // 128 + 16 + 128 + 16 + 8 = 296 vertices.
  CHECK(counts.vertices == 296);
  // 384 as above + 16 leaf-spine = 400 edges.
  CHECK(counts.edges == 400);
}

TEST_CASE("graph counts: NVL72, 4 racks, one SU per rack") {
  const Topology topo = MustBuild(Nvl72(4, /*su_nodes=*/18));
  const Topology::Counts counts = topo.counts();
  // 72 nodes x 4 = 288 GPUs; 4 domains; 72 x 4 = 288 NICs; 4 SUs x 4 rails =
  // 16 leaves; 4 spine planes.
  CHECK(counts.gpus == 288);
  CHECK(counts.nvswitch_domains == 4);
  CHECK(counts.nics == 288);
  CHECK(counts.leaf_switches == 16);
  CHECK(counts.spine_switches == 4);
  // 288 + 4 + 288 + 16 + 4 = 600 vertices; 3 x 288 + 16 = 880 edges.
  CHECK(counts.vertices == 600);
  CHECK(counts.edges == 880);
}

TEST_CASE("partial last scalable unit") {
  // 20 nodes, SUs of 8: ceil(20 / 8) = 3 SUs, the last one with 4 nodes.
  const Topology topo = MustBuild(DgxH100(20, /*su_nodes=*/8));
  CHECK(topo.counts().leaf_switches == 3 * 8);
  CHECK(topo.su_of(19 * 8) == 2);
  // GPU 0 (node 0, SU 0) to GPU 152 (node 19, SU 2), both on rail 0: via spine.
  CHECK(topo.PathBetween(0, 152).tier == LinkTier::kSpine);
}

TEST_CASE("index accessors") {
  const Topology topo = MustBuild(DgxH100(16, /*su_nodes=*/8));
  // GPU 77 = node 77 / 8 = 9, local 5, rail 5 % 8 = 5, domain 9, SU 9 / 8 = 1.
  CHECK(topo.node_of(77) == 9);
  CHECK(topo.domain_of(77) == 9);
  CHECK(topo.rail_of(77) == 5);
  CHECK(topo.su_of(77) == 1);
  CHECK(topo.cluster().name == "h100-dgx-16n");

  // Out of range: -1 for every index, no crash.
  CHECK(topo.node_of(128) == -1);
  CHECK(topo.domain_of(-1) == -1);
  CHECK(topo.rail_of(1000) == -1);
  CHECK(topo.su_of(128) == -1);

  // NVL72: domain = gpu / 72, so GPU 100 (node 25) is in domain 1.
  const Topology nvl = MustBuild(Nvl72(4, /*su_nodes=*/18));
  CHECK(nvl.node_of(100) == 25);
  CHECK(nvl.domain_of(100) == 1);
  CHECK(nvl.rail_of(100) == 0);
  CHECK(nvl.su_of(100) == 1);
}

TEST_CASE("paths on a DGX H100 cluster of two scalable units") {
  const Topology topo = MustBuild(DgxH100(16, /*su_nodes=*/8));

  SUBCASE("same node: GPU - NVSwitch - GPU") {
    // One NVLink hop: 450 GB/s, 2 x 0.3 = 0.6 us, one switch (the NVSwitch).
    const TierInfo path = topo.PathBetween(0, 1);
    CHECK(path.tier == LinkTier::kNvlink);
    CHECK(path.gb_per_s == doctest::Approx(450));
    CHECK(path.latency_us == doctest::Approx(0.6));
    CHECK(path.hops == 1);
  }
  SUBCASE("two nodes of one SU, same rail") {
    // GPU 0 -> NIC 0 -> leaf 0 -> NIC 0 -> GPU 8: bottleneck the NIC,
    // 400 / 8 = 50 GB/s; latency 0 + 1.5 + 1.5 + 0 = 3.0 us; one leaf.
    const TierInfo path = topo.PathBetween(0, 8);
    CHECK(path.tier == LinkTier::kNetwork);
    CHECK(path.gb_per_s == doctest::Approx(50));
    CHECK(path.latency_us == doctest::Approx(3.0));
    CHECK(path.hops == 1);
  }
  SUBCASE("two nodes of one SU, different rails: PXN") {
    // GPU 0 (rail 0) -> NVSwitch -> GPU 1 (rail 1) -> NIC 1 -> leaf 1 ->
    // NIC 1 -> GPU 9: 50 GB/s; 0.6 + 3.0 = 3.6 us; NVSwitch + leaf = 2 hops.
    const TierInfo path = topo.PathBetween(0, 9);
    CHECK(path.tier == LinkTier::kNetwork);
    CHECK(path.gb_per_s == doctest::Approx(50));
    CHECK(path.latency_us == doctest::Approx(3.6));
    CHECK(path.hops == 2);
    // The reverse direction relays on the source side too: same figures.
    const TierInfo back = topo.PathBetween(9, 0);
    CHECK(back.latency_us == doctest::Approx(3.6));
    CHECK(back.hops == 2);
  }
  SUBCASE("two SUs, same rail") {
    // GPU 0 (SU 0) to GPU 64 (node 8, SU 1): NIC - leaf - spine - leaf - NIC:
    // 50 GB/s (oversubscription 1); 3.0 + 1.0 = 4.0 us; leaf, spine, leaf = 3.
    const TierInfo path = topo.PathBetween(0, 64);
    CHECK(path.tier == LinkTier::kSpine);
    CHECK(path.gb_per_s == doctest::Approx(50));
    CHECK(path.latency_us == doctest::Approx(4.0));
    CHECK(path.hops == 3);
  }
  SUBCASE("two SUs, different rails") {
    // PXN hop first: 0.6 + 3.0 + 1.0 = 4.6 us; NVSwitch + 3 = 4 hops.
    const TierInfo path = topo.PathBetween(0, 71);
    CHECK(path.tier == LinkTier::kSpine);
    CHECK(path.latency_us == doctest::Approx(4.6));
    CHECK(path.hops == 4);
  }
  SUBCASE("a GPU to itself") {
    const TierInfo path = topo.PathBetween(5, 5);
    CHECK(path.tier == LinkTier::kNvlink);
    CHECK(path.gb_per_s == doctest::Approx(450));
    CHECK(path.latency_us == 0);
    CHECK(path.hops == 0);
  }
  SUBCASE("out of range: an empty result, no crash") {
    const TierInfo path = topo.PathBetween(0, 128);
    CHECK(path.gb_per_s == 0);
    CHECK(path.hops == 0);
    CHECK(topo.PathBetween(-1, 3).gb_per_s == 0);
  }
}

TEST_CASE("bandwidth tiers follow the cluster's figures") {
  // Oversubscription 2: the spine tier gets 50 / 2 = 25 GB/s per GPU.
  const Topology topo = MustBuild(DgxH100(16, /*su_nodes=*/8, /*spine_oversubscription=*/2));
  CHECK(topo.PathBetween(0, 1).gb_per_s == doctest::Approx(450));
  CHECK(topo.PathBetween(0, 8).gb_per_s == doctest::Approx(50));
  CHECK(topo.PathBetween(0, 64).gb_per_s == doctest::Approx(25));

  // Halving the NIC rate (200 Gbit/s = 25 GB/s) halves the network tier and
  // the spine tier (25 / 2 = 12.5); NVLink is untouched.
  ClusterSpec slow_nics = DgxH100(16, /*su_nodes=*/8, /*spine_oversubscription=*/2);
  slow_nics.nic_gbit_per_s = 200;
  const Topology slow = MustBuild(slow_nics);
  CHECK(slow.PathBetween(0, 1).gb_per_s == doctest::Approx(450));
  CHECK(slow.PathBetween(0, 8).gb_per_s == doctest::Approx(25));
  CHECK(slow.PathBetween(0, 64).gb_per_s == doctest::Approx(12.5));
}

TEST_CASE("the bottleneck is the slowest link on the path") {
  // NVLink at 40 GB/s, below the 50 GB/s NIC: a same-rail network path does
  // not touch NVLink (50), a PXN path relays over it (min(40, 50) = 40).
  ClusterSpec cluster = DgxH100(4);
  cluster.nvlink_gb_per_s = 40;
  const Topology topo = MustBuild(cluster);
  CHECK(topo.PathBetween(0, 8).gb_per_s == doctest::Approx(50));
  CHECK(topo.PathBetween(0, 9).gb_per_s == doctest::Approx(40));
}

TEST_CASE("fewer NICs than GPUs: rails repeat within a node") {
  // 8 GPUs, 4 NICs: local GPU g uses NIC g % 4, so GPUs 1 and 5 share rail 1.
  ClusterSpec cluster = DgxH100(4);
  cluster.nics_per_node = 4;
  const Topology topo = MustBuild(cluster);
  CHECK(topo.rail_of(5) == 1);
  CHECK(topo.counts().nics == 16);
  // GPU 1 (node 0, rail 1) to GPU 13 (node 1, local 5, rail 1): same rail,
  // 3.0 us, one leaf.
  const TierInfo same_rail = topo.PathBetween(1, 13);
  CHECK(same_rail.latency_us == doctest::Approx(3.0));
  CHECK(same_rail.hops == 1);
  // GPU 5 (rail 1) to GPU 11 (node 1, local 3, rail 3): PXN relay to GPU 7
  // (rail 3 in GPU 5's block of four), 3.6 us, 2 hops, 50 GB/s.
  const TierInfo pxn = topo.PathBetween(5, 11);
  CHECK(pxn.latency_us == doctest::Approx(3.6));
  CHECK(pxn.hops == 2);
  CHECK(pxn.gb_per_s == doctest::Approx(50));
}

TEST_CASE("NVL72: 72-GPU NVLink domains of 18 nodes") {
  const Topology topo = MustBuild(Nvl72(4, /*su_nodes=*/18));
  // GPUs 0 and 71 (nodes 0 and 17) share rack 0's NVSwitch: 900 GB/s, 0.6 us.
  const TierInfo in_rack = topo.PathBetween(0, 71);
  CHECK(in_rack.tier == LinkTier::kNvlink);
  CHECK(in_rack.gb_per_s == doctest::Approx(900));
  CHECK(in_rack.hops == 1);
  // GPU 0 to GPU 72 (rack 1, its own SU): leaf, spine, leaf at 50 GB/s.
  const TierInfo across = topo.PathBetween(0, 72);
  CHECK(across.tier == LinkTier::kSpine);
  CHECK(across.gb_per_s == doctest::Approx(50));
  CHECK(across.hops == 3);
}

TEST_CASE("invalid clusters name the field") {
  ClusterSpec cluster = DgxH100(16);
  cluster.name = "h100-dgx-16n";

  SUBCASE("domain not made of whole nodes") {
    cluster.nvlink_domain_gpus = 12;
    CHECK(BuildError(cluster) ==
          "cluster h100-dgx-16n: nvlink_domain_gpus (12) is not a multiple of gpus_per_node (8)");
  }
  SUBCASE("domain does not divide the cluster") {
    // 128 GPUs are not a whole number of 48-GPU domains.
    cluster.nvlink_domain_gpus = 48;
    CHECK(BuildError(cluster) ==
          "cluster h100-dgx-16n: nvlink_domain_gpus (48) does not divide the cluster's 128 GPUs "
          "(16 nodes x 8)");
  }
  SUBCASE("no nodes") {
    cluster.nodes = 0;
    CHECK(BuildError(cluster) == "cluster h100-dgx-16n: nodes (0) must be at least 1");
  }
  SUBCASE("no NICs") {
    cluster.nics_per_node = 0;
    CHECK(BuildError(cluster) == "cluster h100-dgx-16n: nics_per_node (0) must be at least 1");
  }
  SUBCASE("NICs that do not split the GPUs evenly") {
    cluster.nics_per_node = 3;
    CHECK(BuildError(cluster) ==
          "cluster h100-dgx-16n: nics_per_node (3) does not divide gpus_per_node (8): every "
          "rail must serve the same number of GPUs");
  }
  SUBCASE("fabric fields") {
    cluster.fabric.su_nodes = 0;
    cluster.fabric.spine_oversubscription = 0.5;
    CHECK(BuildError(cluster) ==
          "cluster h100-dgx-16n: fabric.su_nodes (0) must be at least 1\n"
          "cluster h100-dgx-16n: fabric.spine_oversubscription (0.5) must be at least 1");
  }
  SUBCASE("bandwidths and latencies") {
    cluster.nic_gbit_per_s = 0;
    cluster.nvlink_gb_per_s = -1;
    cluster.latency.spine_us = -2;
    const std::string message = BuildError(cluster);
    CHECK(message.find("nvlink_gb_per_s (-1) must be positive") != std::string::npos);
    CHECK(message.find("nic_gbit_per_s (0) must be positive") != std::string::npos);
    CHECK(message.find("latency.spine_us (-2) must be zero or positive") != std::string::npos);
  }
  SUBCASE("too many GPUs") {
    // The cap is 2^20 = 1,048,576 GPUs; 131,073 nodes x 8 = 1,048,584.
    cluster.nodes = 131073;
    CHECK(BuildError(cluster) ==
          "cluster h100-dgx-16n: nodes x gpus_per_node (131073 x 8 = 1048584 GPUs) exceeds the "
          "supported 1048576");
  }
  SUBCASE("an unnamed cluster") {
    cluster.name = "";
    cluster.gpus_per_node = 0;
    CHECK(BuildError(cluster).rfind("cluster (unnamed): gpus_per_node (0)", 0) == 0);
  }
}

TEST_CASE("131,072 GPUs build, with the counts the fabric implies") {
  // Build time is measured in bench/topology_bench.cc, not here.
  const Topology topo = MustBuild(DgxH100(16384));
  // 16384 nodes / 32 = 512 SUs: vertices 131072 GPUs + 16384 NVSwitch +
  // 131072 NICs + 512 x 8 = 4096 leaves + 8 spines = 282632; edges
  // 3 x 131072 + 4096 leaf-spine = 397312.
  const Topology::Counts counts = topo.counts();
  CHECK(counts.vertices == 282632);
  CHECK(counts.edges == 397312);
  CHECK(topo.PathBetween(0, 131071).tier == LinkTier::kSpine);
}

}  // namespace
}  // namespace foldplan
