// TopologySummaryText and TopologySummaryJson.
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "topology/topology.h"
#include "text_count.h"
#include "topology_fixtures.h"

namespace foldplan {
namespace {

using testing::Contains;
using testing::DgxH100;
using testing::MustBuild;
using testing::Nvl72;

TEST_CASE("text summary, two scalable units") {
  ClusterSpec cluster = DgxH100(16, /*su_nodes=*/8, /*spine_oversubscription=*/2);
  cluster.description = "DGX H100 test cluster. Sources: none";
  const Topology topo = MustBuild(cluster);
  const std::string text = TopologySummaryText(topo);
  CHECK(Contains(text, "cluster h100-dgx-16n: DGX H100 test cluster\n"));
  CHECK(Contains(text, "128 x H100 SXM5, 8 per node"));
  CHECK(Contains(text, "16 of 8 GPUs (1 node), 450 GB/s per GPU per direction"));
  CHECK(Contains(text, "8 NICs per node at 400 Gbit/s = 50 GB/s"));
  CHECK(Contains(text, "scalable units  2 of up to 8 nodes"));
  CHECK(Contains(text, "16 leaf (one per rail per SU), 8 spine (one plane per rail, "
                       "oversubscription 2:1)"));
  // 128 + 16 + 128 + 16 + 8 = 296 vertices; 3 x 128 + 16 = 400 edges.
  CHECK(Contains(text, "296 vertices"));
  CHECK(Contains(text, "400 edges"));
  // Tier rows: bandwidth, latency, hops, example pair.
  CHECK(Contains(text, "nvlink                      450         0.6     1  GPU 0 - GPU 1\n"));
  CHECK(Contains(text, "network (same SU)            50           3     1  GPU 0 - GPU 8\n"));
  CHECK(Contains(text, "spine                        25           4     3  GPU 0 - GPU 120\n"));
  CHECK(Contains(text, "+0.6 us, +1 hop"));
  CHECK(Contains(text, "whole cluster      128     16       16      8    2  8           "
                       "nvlink, network, spine\n"));
}

TEST_CASE("text summary, one scalable unit: no spine row") {
  const Topology topo = MustBuild(DgxH100(4));
  const std::string text = TopologySummaryText(topo);
  CHECK(Contains(text, "(one scalable unit)"));
  CHECK(Contains(text, "0 spine\n"));
}

TEST_CASE("JSON summary") {
  const Topology topo = MustBuild(DgxH100(16, /*su_nodes=*/8, /*spine_oversubscription=*/2));
  const nlohmann::json j = nlohmann::json::parse(TopologySummaryJson(topo));
  CHECK(j["schema"] == "foldplan.topology/v1");
  CHECK(j["cluster"]["name"] == "h100-dgx-16n");
  CHECK(j["gpu"]["count"] == 128);
  CHECK(j["nvlink_domains"]["count"] == 16);
  CHECK(j["scalable_units"]["count"] == 2);
  CHECK(j["switches"]["spine"] == 8);
  CHECK(j["graph"]["vertices"] == 296);
  CHECK(j["graph"]["edges"] == 400);

  const nlohmann::json& tiers = j["tiers"];
  REQUIRE(tiers.size() == 3);
  CHECK(tiers[0]["tier"] == "nvlink");
  CHECK(tiers[0]["gb_per_s"].get<double>() == doctest::Approx(450));
  CHECK(tiers[1]["tier"] == "network");
  CHECK(tiers[1]["gb_per_s"].get<double>() == doctest::Approx(50));
  CHECK(tiers[1]["latency_us"].get<double>() == doctest::Approx(3.0));
  // The cross-rail example sits at the first domain boundary inside an SU,
  // nodes 0 and 1: GPU 0 (rail 0) - GPU 9 (rail 1), 3.0 + 0.6 = 3.6 us,
  // NVSwitch + leaf = 2 hops.
  CHECK(tiers[1]["cross_rail"]["pair"] == nlohmann::json::array({0, 9}));
  CHECK(tiers[1]["cross_rail"]["latency_us"].get<double>() == doctest::Approx(3.6));
  CHECK(tiers[1]["cross_rail"]["hops"] == 2);
  CHECK(tiers[2]["tier"] == "spine");
  CHECK(tiers[2]["gb_per_s"].get<double>() == doctest::Approx(25));

  const nlohmann::json& spans = j["spans"];
  REQUIRE(spans.size() == 3);
  CHECK(spans[0]["name"] == "one node");
  CHECK(spans[0]["inside_one_domain"] == true);
  CHECK(spans[2]["name"] == "whole cluster");
  CHECK(spans[2]["gpus"] == 128);
  CHECK(spans[2]["crosses_spine"] == true);
  CHECK(spans[2]["tiers"].size() == 3);
}

}  // namespace
}  // namespace foldplan
