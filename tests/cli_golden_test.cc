// End-to-end: the foldplan binary's output on shipped inputs, against golden files.
#include "cli_run.h"


using foldplan::testing::CheckGolden;
using foldplan::testing::RunFoldplan;

TEST_CASE("enumerate --why on the defaults") {
  auto r = RunFoldplan("enumerate --why --limit 12");
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CheckGolden("enumerate_default_why.txt", r.out);
}

TEST_CASE("enumerate on NVL72 racks finds packed placements") {
  // 256 of the 288 GPUs: an EP 64 group from rank 64 straddles two racks
  // under the linear placement; packed placement keeps 64 ranks per rack.
  auto r = RunFoldplan("enumerate --cluster gb200-nvl72-4r --gpus 256 --model qwen3-30b-a3b --limit 0 --json");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("\"placement\": \"packed\"") != std::string::npos);
  r = RunFoldplan("enumerate --cluster gb200-nvl72-4r --model qwen3-30b-a3b --limit 8");
  CHECK(r.exit_code == 0);
  CheckGolden("enumerate_nvl72_qwen3.txt", r.out);
}

TEST_CASE("enumerate --layout accepts a legal layout and shows the stage split") {
  auto r = RunFoldplan(
      "enumerate --cluster h100-dgx-128n --model deepseek-v3 --layout tp=1,cp=1,pp=16,ep=64,etp=1");
  CHECK(r.exit_code == 0);
  CheckGolden("enumerate_layout_deepseek.txt", r.out);
}

TEST_CASE("an illegal --layout is refused with every rule it breaks") {
  auto r = RunFoldplan("enumerate --model mixtral-8x7b --layout tp=16,cp=1,pp=8,ep=16,etp=1,vpp=3");
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CheckGolden("enumerate_illegal_layout.err", r.err);
}

TEST_CASE("topo summary") {
  auto r = RunFoldplan("topo --cluster h100-dgx-16n");
  CHECK(r.exit_code == 0);
  CheckGolden("topo_h100_dgx_16n.txt", r.out);
}

TEST_CASE("ranks --format megatron from degrees alone") {
  auto r = RunFoldplan("ranks --world-size 16 --layout tp=2,cp=2,pp=2,ep=4,etp=1 --format megatron");
  CHECK(r.exit_code == 0);
  CheckGolden("ranks_w16_megatron.txt", r.out);
}

TEST_CASE("ranks --format rankmap from degrees alone") {
  auto r = RunFoldplan("ranks --world-size 16 --layout tp=2,cp=2,pp=2,ep=4,etp=1 --format rankmap");
  CHECK(r.exit_code == 0);
  CheckGolden("ranks_w16_rankmap.json", r.out);
}

TEST_CASE("ranks --format torch") {
  auto r = RunFoldplan("ranks --world-size 16 --layout tp=2,cp=2,pp=2,ep=4,etp=1 --format torch");
  CHECK(r.exit_code == 0);
  CheckGolden("ranks_w16_torch.txt", r.out);
}

TEST_CASE("ranks with --model checks the model's rules") {
  auto r = RunFoldplan("ranks --model mixtral-8x7b --layout tp=2,cp=1,pp=4,ep=16,etp=1 --format megatron");
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("ep_divides_experts: experts 8 % ep 16 != 0") != std::string::npos);
}

TEST_CASE("ranks -o writes the file and nothing to stdout") {
  const std::string path = "/tmp/foldplan_cli_ranks_" + std::to_string(::getpid()) + ".json";
  auto r = RunFoldplan("ranks --world-size 16 --layout tp=2,cp=2,pp=2,ep=4,etp=1 -o " + path);
  CHECK(r.exit_code == 0);
  CHECK(r.out.empty());
  CHECK(foldplan::testing::Slurp(path).find("foldplan.rankmap/v1") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("a refused export writes no output file") {
  const std::string path = "/tmp/foldplan_cli_refused_" + std::to_string(::getpid()) + ".toml";
  auto r = RunFoldplan("ranks --world-size 16 --layout tp=2,cp=2,pp=2,ep=4,etp=1 --format torchtitan -o " + path);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("ring attention only") != std::string::npos);
  CHECK(access(path.c_str(), F_OK) != 0);
}
