// Launcher files from a placed rank map: every rank once, on its planned
// host and GPU; idle GPUs never visible; host lists checked.
#include <doctest/doctest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "planner/launch_files.h"
#include "planner/rank_map.h"
#include "fixtures.h"

namespace foldplan {
namespace {

std::vector<std::string> Hosts(int n) {
  std::vector<std::string> h;
  for (int i = 0; i < n; ++i) h.push_back("node" + std::to_string(i));
  return h;
}

std::vector<std::string> Lines(const std::string& text, bool drop_comments = true) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (drop_comments && (line.empty() || line[0] == '#')) continue;
    out.push_back(line);
  }
  return out;
}

// tp 4 on 2 nodes of 6 GPUs, one NVLink domain per node: packed blocks of 4
// ranks, one per domain (floor(6 / 4)), so ranks 0-3 on node 0 GPUs 0-3 and
// ranks 4-7 on node 1 GPUs 0-3; GPUs 4 and 5 of each node idle.
RankMap PackedTp4() {
  Layout l = testing::MakeLayout(8, 4, 1, 1, 1, 1);
  l.placement = Placement::kPacked;
  Result<RankMap> m = BuildRankMap(l, testing::MakeCluster(2, 6, 6));
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  return m.value();
}

// Checks the assignment against the map: rank r's host is hosts[node(r)],
// its GPU the map's local GPU, and its local rank indexes its node's
// visible list at exactly that GPU.
void CheckAgainstMap(const LaunchAssignment& a, const RankMap& map, const std::vector<std::string>& hosts) {
  REQUIRE(static_cast<int>(a.ranks.size()) == map.world());
  for (int r = 0; r < map.world(); ++r) {
    const RankLaunch& k = a.ranks[r];
    CHECK(k.node == map.place(r).node);
    CHECK(k.host == hosts[map.place(r).node]);
    CHECK(k.local_gpu == map.place(r).local_gpu);
    bool found = false;
    for (const NodeLaunch& n : a.nodes) {
      if (n.node != k.node) continue;
      found = true;
      REQUIRE(k.local_rank < static_cast<int>(n.visible_gpus.size()));
      CHECK(n.visible_gpus[k.local_rank] == map.place(r).local_gpu);
      CHECK(n.ranks[k.local_rank] == r);
    }
    CHECK(found);
  }
}

TEST_CASE("launch: linear placement is rank r on GPU r, local rank = local GPU") {
  Result<RankMap> m = BuildRankMap(testing::MakeLayout(16, 2, 1, 2, 1, 1), testing::MakeCluster(2));
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  const LaunchPlacement p = LaunchPlacementOf(m.value());
  CHECK(IsLinearPlacement(p, 8));
  CHECK(NodesUsed(p) == 2);
  auto a = AssignHosts(p, Hosts(2), "hosts.txt");
  REQUIRE_MESSAGE(a.ok(), a.status().message());
  CheckAgainstMap(a.value(), m.value(), Hosts(2));
  for (int r = 0; r < 16; ++r) CHECK(a->ranks[r].local_rank == r % 8);
  REQUIRE(a->nodes.size() == 2);
  CHECK(a->nodes[1].visible_gpus == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
}

TEST_CASE("launch: packed placement leaves idle GPUs invisible and matches the rank map") {
  const RankMap map = PackedTp4();
  const LaunchPlacement p = LaunchPlacementOf(map);
  CHECK_FALSE(IsLinearPlacement(p, 6));  // rank 4 is on GPU 6 (node 1 GPU 0), not GPU 4
  auto a = AssignHosts(p, Hosts(2), "hosts.txt");
  REQUIRE_MESSAGE(a.ok(), a.status().message());
  CheckAgainstMap(a.value(), map, Hosts(2));
  REQUIRE(a->nodes.size() == 2);
  for (const NodeLaunch& n : a->nodes) CHECK(n.visible_gpus == std::vector<int>{0, 1, 2, 3});
  CHECK(a->ranks[4].host == "node1");
  CHECK(a->ranks[4].local_rank == 0);
}

TEST_CASE("launch: rankfile has one line per rank, each on its planned host and a distinct slot") {
  const RankMap map = PackedTp4();
  const LaunchPlacement p = LaunchPlacementOf(map);
  auto a = AssignHosts(p, Hosts(2), "hosts.txt");
  REQUIRE(a.ok());
  auto text = LaunchFileText(a.value(), p, LaunchFormat::kOpenMpiRankfile);
  REQUIRE_MESSAGE(text.ok(), text.status().message());
  const std::vector<std::string> lines = Lines(text.value());
  REQUIRE(lines.size() == 8);
  std::set<std::string> slots;  // host:slot, each once
  for (int r = 0; r < 8; ++r) {
    const std::string host = "node" + std::to_string(map.place(r).node);
    const std::string want = "rank " + std::to_string(r) + "=" + host + " slot=" + std::to_string(r % 4);
    CHECK(lines[r] == want);
    CHECK(slots.insert(host + ":" + std::to_string(r % 4)).second);
  }
  // The GPU comment: every node shows GPUs 0-3, never the idle 4 and 5.
  CHECK(text->find("CUDA_VISIBLE_DEVICES=0,1,2,3") != std::string::npos);
  CHECK(text->find("CUDA_VISIBLE_DEVICES=0,1,2,3,4") == std::string::npos);
}

TEST_CASE("launch: slurm hostfile is one host per rank in rank order, nothing else") {
  const RankMap map = PackedTp4();
  const LaunchPlacement p = LaunchPlacementOf(map);
  auto a = AssignHosts(p, Hosts(2), "hosts.txt");
  REQUIRE(a.ok());
  auto text = LaunchFileText(a.value(), p, LaunchFormat::kSlurm);
  REQUIRE(text.ok());
  const std::vector<std::string> lines = Lines(text.value(), false);
  REQUIRE(lines.size() == 8);
  for (int r = 0; r < 8; ++r) CHECK(lines[r] == "node" + std::to_string(map.place(r).node));
}

TEST_CASE("launch: NVL72 packed EP 64 skips the idle nodes 16, 17 in the hostfile") {
  // Racks of 18 nodes x 4 GPUs; packed blocks of 64 ranks fill nodes 0-15
  // of rack 0 and 18-33 of rack 1 (doc/folding.md section 5).
  ClusterSpec c = testing::MakeCluster(36, 4, 72);
  Layout l = testing::MakeLayout(128, 1, 1, 1, 64, 1);
  l.placement = Placement::kPacked;
  Result<RankMap> m = BuildRankMap(l, c);
  REQUIRE_MESSAGE(m.ok(), m.status().message());
  const LaunchPlacement p = LaunchPlacementOf(m.value());
  CHECK(NodesUsed(p) == 34);
  auto a = AssignHosts(p, Hosts(36), "hosts.txt");
  REQUIRE_MESSAGE(a.ok(), a.status().message());
  CheckAgainstMap(a.value(), m.value(), Hosts(36));
  auto text = LaunchFileText(a.value(), p, LaunchFormat::kHostfile);
  REQUIRE_MESSAGE(text.ok(), text.status().message());
  const std::vector<std::string> lines = Lines(text.value());
  REQUIRE(lines.size() == 32);  // 34 nodes used minus the 2 idle ones
  CHECK(lines[15] == "node15 slots=4");
  CHECK(lines[16] == "node18 slots=4");
  CHECK(text->find("node16") == std::string::npos);
}

TEST_CASE("launch: hostfile refuses a node whose ranks are not the next consecutive run") {
  // Built by hand: rank 0 and 2 on node 0, rank 1 on node 1.
  LaunchPlacement p{"hand-made", "linear", {{0, 0}, {1, 0}, {0, 1}}, {}};
  auto a = AssignHosts(p, Hosts(2), "hosts.txt");
  REQUIRE(a.ok());
  CHECK(a->ranks[2].local_rank == 1);  // second rank of node 0
  auto text = LaunchFileText(a.value(), p, LaunchFormat::kHostfile);
  REQUIRE_FALSE(text.ok());
  CHECK(text.status().message().find("node 0 (node0) holds ranks 0,2") != std::string::npos);
  // The rankfile expresses it.
  CHECK(LaunchFileText(a.value(), p, LaunchFormat::kOpenMpiRankfile).ok());
}

TEST_CASE("launch: env script sets each rank's node GPU list and local rank") {
  const RankMap map = PackedTp4();
  const LaunchPlacement p = LaunchPlacementOf(map);
  auto a = AssignHosts(p, Hosts(2), "hosts.txt");
  REQUIRE(a.ok());
  auto text = LaunchFileText(a.value(), p, LaunchFormat::kEnv);
  REQUIRE(text.ok());
  CHECK(text->find("  5) FOLDPLAN_HOST=node1 LOCAL_RANK=1 CUDA_VISIBLE_DEVICES=0,1,2,3 ;;\n") != std::string::npos);
  CHECK(text->find("  8)") == std::string::npos);
}

TEST_CASE("launch: too few hosts names the file, the count and the first node without one") {
  const LaunchPlacement p = LaunchPlacementOf(PackedTp4());
  auto a = AssignHosts(p, Hosts(1), "hosts.txt");
  REQUIRE_FALSE(a.ok());
  CHECK(a.status().message() == "hosts.txt: 1 hosts, but the placement uses 2 nodes; node 1 has no host "
                                "(one host per line, in node order)");
}

TEST_CASE("launch: two ranks on one GPU are refused") {
  LaunchPlacement p{"hand-made", "linear", {{0, 3}, {0, 3}}, {}};
  auto a = AssignHosts(p, Hosts(1), "h");
  REQUIRE_FALSE(a.ok());
  CHECK(a.status().message() == "ranks 0 and 1 are both placed on node 0 GPU 3");
}

TEST_CASE("host list: comments, blank lines and spaces skipped; names in order") {
  auto h = ParseHostList("# racks\n\n  gpu-a01  \ngpu-a02 # second\n\tgpu_b.example.com\n", "h.txt");
  REQUIRE_MESSAGE(h.ok(), h.status().message());
  CHECK(h.value() == std::vector<std::string>{"gpu-a01", "gpu-a02", "gpu_b.example.com"});
}

TEST_CASE("host list: a repeated host names both lines") {
  auto h = ParseHostList("a\nb\n\na\n", "h.txt");
  REQUIRE_FALSE(h.ok());
  CHECK(h.status().message() == "h.txt:4: host a repeats line 1 (one line per node, in node order)");
}

TEST_CASE("host list: bad names and an empty list are refused with the line") {
  for (const char* bad : {"a b\n", "host:8\n", "rank=1\n", "-np\n"}) {
    auto h = ParseHostList(std::string("ok\n") + bad, "h.txt");
    REQUIRE_FALSE(h.ok());
    CHECK(h.status().message().rfind("h.txt:2: ", 0) == 0);
  }
  CHECK_FALSE(ParseHostList(std::string(kMaxHostNameChars + 1, 'a'), "h.txt").ok());
  CHECK(ParseHostList(std::string(kMaxHostNameChars, 'a'), "h.txt").ok());
  auto empty = ParseHostList("# nothing\n\n", "h.txt");
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().message() == "h.txt: no host names (one per line, in node order)");
}

}  // namespace
}  // namespace foldplan
