// `foldplan ranks --format openmpi-rankfile|slurm|hostfile|env --hosts FILE`
// and `ranks --plan FILE --candidate N`: exit codes, messages naming the
// file, atomic -o, and every rank on the host and GPU its rank map says.
#include "cli_run.h"
#include "text_count.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

using foldplan::testing::Contains;
using foldplan::testing::RunFoldplan;
using foldplan::testing::Slurp;
using foldplan::testing::TempPath;

namespace {

// EP 64 packed on two GB200 NVL72 racks (18 nodes x 4 GPUs per rack): ranks
// 0-63 on nodes 0-15, ranks 64-127 on nodes 18-33, nodes 16, 17 idle.
const std::string kPacked =
    "ranks --cluster gb200-nvl72-4r --gpus 128 --layout tp=1,pp=1,ep=64,etp=1,placement=packed";

// n host names node0.. in a file, with a comment and a blank line.
std::string HostsFile(int n, const std::string& name = "hosts") {
  const std::string path = TempPath(name);
  std::ofstream f(path);
  f << "# one host per node\n\n";
  for (int i = 0; i < n; ++i) f << "node" << i << "\n";
  return path;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  return out;
}

}  // namespace

TEST_CASE("ranks --format openmpi-rankfile puts each rank on its rank map's node") {
  const std::string hosts = HostsFile(36);
  auto map = RunFoldplan(kPacked + " --format rankmap");
  REQUIRE(map.exit_code == 0);
  const auto placement = nlohmann::json::parse(map.out)["placement"];
  auto r = RunFoldplan(kPacked + " --format openmpi-rankfile --hosts " + hosts);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const std::vector<std::string> lines = Lines(r.out);
  REQUIRE(lines.size() == 128);
  for (int rank = 0; rank < 128; ++rank) {
    const int node = placement["node"][rank];
    // Local rank = index among the node's ranks: 4 per used node, in order.
    const std::string want = "rank " + std::to_string(rank) + "=node" + std::to_string(node) +
                             " slot=" + std::to_string(rank % 4);
    CHECK(lines[rank] == want);
  }
  CHECK(Contains(r.out, "# node 18 node18: ranks 64-67, CUDA_VISIBLE_DEVICES=0,1,2,3\n"));
  CHECK_FALSE(Contains(r.out, "node16"));  // idle node
  CHECK(Contains(r.err, "note: run it as mpirun --rankfile FILE -np 128"));
  std::remove(hosts.c_str());
}

TEST_CASE("ranks --format slurm and hostfile from the same placement") {
  const std::string hosts = HostsFile(34);  // exactly the nodes used
  auto slurm = RunFoldplan(kPacked + " --format slurm --hosts " + hosts);
  REQUIRE_MESSAGE(slurm.exit_code == 0, slurm.err);
  const std::vector<std::string> lines = Lines(slurm.out);
  REQUIRE(lines.size() == 128);
  CHECK(lines[63] == "node15");
  CHECK(lines[64] == "node18");
  CHECK(Contains(slurm.err, "srun --distribution=arbitrary -n 128"));
  auto hostfile = RunFoldplan(kPacked + " --format hostfile --hosts " + hosts);
  REQUIRE(hostfile.exit_code == 0);
  const std::vector<std::string> slots = Lines(hostfile.out);
  REQUIRE(slots.size() == 32);
  CHECK(slots[16] == "node18 slots=4");
  std::remove(hosts.c_str());
}

TEST_CASE("ranks --format env, sourced per rank, selects the rank map's GPU") {
  // For each rank sampled, position LOCAL_RANK of CUDA_VISIBLE_DEVICES must
  // be the map's local GPU (the idle GPUs inside a node: the unit test).
  const std::string hosts = HostsFile(36);
  const std::string env = TempPath("env.sh");
  auto r = RunFoldplan(kPacked + " --format env --hosts " + hosts + " -o " + env);
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  auto map = RunFoldplan(kPacked + " --format rankmap");
  const auto placement = nlohmann::json::parse(map.out)["placement"];
  for (int rank : {0, 5, 63, 64, 127}) {
    const std::string out = TempPath("env.out");
    const std::string cmd = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank) + " sh -c '. " + env +
                            " && echo $FOLDPLAN_HOST $LOCAL_RANK $CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER' >" + out;
    REQUIRE(std::system(cmd.c_str()) == 0);
    std::istringstream got(Slurp(out));
    std::string host, visible, order;
    int local = -1;
    got >> host >> local >> visible >> order;
    CHECK(host == "node" + std::to_string(int(placement["node"][rank])));
    CHECK(visible == "0,1,2,3");
    CHECK(local == int(placement["local_gpu"][rank]));  // visible list is 0-3: position = GPU
    CHECK(order == "PCI_BUS_ID");
    std::remove(out.c_str());
  }
  // A rank outside the plan is an error, not a silent GPU 0.
  const std::string bad = "OMPI_COMM_WORLD_RANK=128 sh -c '. " + env + "' 2>/dev/null";
  CHECK(std::system(bad.c_str()) != 0);
  std::remove(env.c_str());
  std::remove(hosts.c_str());
}

TEST_CASE("ranks launcher formats: --hosts required, checked, and named in errors") {
  auto none = RunFoldplan(kPacked + " --format openmpi-rankfile");
  CHECK(none.exit_code == 2);
  CHECK(Contains(none.err, "--format openmpi-rankfile needs --hosts FILE"));

  auto wrong = RunFoldplan(kPacked + " --format megatron --hosts /dev/null");
  CHECK(wrong.exit_code == 2);
  CHECK(Contains(wrong.err, "--hosts is for the launcher formats"));

  const std::string short_list = HostsFile(20, "short");
  auto few = RunFoldplan(kPacked + " --format slurm --hosts " + short_list);
  CHECK(few.exit_code == 1);
  CHECK(Contains(few.err, short_list + ": 20 hosts, but the placement uses 34 nodes; node 20 has no host"));

  const std::string dup = TempPath("dup");
  std::ofstream(dup) << "a\nb\na\n";
  auto twice = RunFoldplan(kPacked + " --format slurm --hosts " + dup);
  CHECK(twice.exit_code == 1);
  CHECK(Contains(twice.err, dup + ":3: host a repeats line 1"));

  auto missing = RunFoldplan(kPacked + " --format slurm --hosts /no/such/hosts");
  CHECK(missing.exit_code == 1);
  CHECK(Contains(missing.err, "/no/such/hosts"));
  for (const std::string& f : {short_list, dup}) std::remove(f.c_str());
}

TEST_CASE("ranks launcher -o writes the file, and a refusal leaves none") {
  const std::string hosts = HostsFile(36);
  const std::string out = TempPath("rankfile");
  std::remove(out.c_str());
  auto r = RunFoldplan(kPacked + " --format openmpi-rankfile --hosts " + hosts + " -o " + out);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.empty());
  CHECK(Lines(Slurp(out)).size() == 128);
  CHECK(Contains(r.err, "mpirun --rankfile " + out));
  std::remove(out.c_str());
  const std::string short_list = HostsFile(2, "two");
  auto refused = RunFoldplan(kPacked + " --format openmpi-rankfile --hosts " + short_list + " -o " + out);
  CHECK(refused.exit_code == 1);
  CHECK(access(out.c_str(), F_OK) != 0);
  for (const std::string& f : {hosts, short_list}) std::remove(f.c_str());
}

TEST_CASE("ranks --plan exports a plan's candidate; --candidate past the list is refused") {
  const std::string plan = "tests/data/validate/pp2_cp2_ep4.plan.json";
  // The plan's layout (for a communication test on 8 GPUs) does not fit in
  // memory: refused, and exported with --force.
  auto refused = RunFoldplan("ranks --plan " + plan + " --format rankmap");
  CHECK(refused.exit_code == 1);
  CHECK(Contains(refused.err, "does not fit in memory"));
  auto r = RunFoldplan("ranks --plan " + plan + " --format rankmap --force");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto map = nlohmann::json::parse(r.out);
  CHECK(map["world_size"] == 8);
  CHECK(map["layout"].get<std::string>().rfind("tp=1,cp=2,dp=2,pp=2,ep=4", 0) == 0);
  // The same rank map as the plan holds for its best candidate.
  const auto embedded = nlohmann::json::parse(Slurp(std::string(FOLDPLAN_SOURCE_DIR) + "/" + plan))["rank_map"];
  CHECK(map["groups"] == embedded["groups"]);
  CHECK(map["placement"] == embedded["placement"]);

  auto past = RunFoldplan("ranks --plan " + plan + " --candidate 2 --format rankmap");
  CHECK(past.exit_code == 1);
  CHECK(Contains(past.err, "/candidates"));
  auto both = RunFoldplan("ranks --plan " + plan + " --layout tp=2 --format rankmap");
  CHECK(both.exit_code == 2);
  auto alone = RunFoldplan("ranks --world-size 8 --layout tp=2 --candidate 1");
  CHECK(alone.exit_code == 2);
}
