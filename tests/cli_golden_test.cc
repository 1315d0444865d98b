// End-to-end: the foldplan binary's output on shipped inputs, against golden files.
#include "cli_run.h"

#include <nlohmann/json.hpp>


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

TEST_CASE("ranks --format jax") {
  auto r = RunFoldplan("ranks --world-size 16 --layout tp=2,cp=2,pp=2,ep=4,etp=1 --format jax");
  CHECK(r.exit_code == 0);
  CheckGolden("ranks_w16_jax.txt", r.out);
}

TEST_CASE("ranks --format maxtext") {
  // tp 1 and ep within dp: a layout MaxText's fixed axis order can hold.
  auto r = RunFoldplan("ranks --world-size 16 --layout tp=1,cp=1,pp=2,ep=4,etp=1,fsdp=true --format maxtext");
  CHECK(r.exit_code == 0);
  CheckGolden("ranks_w16_maxtext.txt", r.out);
}

TEST_CASE("ranks --format maxtext of a folded MoE layout: ep over dp, the pipeline, the batch") {
  auto r = RunFoldplan(
      "ranks --cluster h100-dgx-16n --gpus 32 --model mixtral-8x7b --layout tp=1,cp=1,pp=2,ep=8,etp=1,fsdp=true "
      "--format maxtext");
  CHECK(r.exit_code == 0);
  CheckGolden("ranks_mixtral_maxtext.txt", r.out);
}

TEST_CASE("ranks --format olmo-core of a folded MoE layout: HSDP with shard degree ep") {
  auto r = RunFoldplan(
      "ranks --cluster h100-dgx-16n --gpus 16 --model mixtral-8x7b --layout tp=1,cp=1,pp=2,ep=4,etp=1,fsdp=true "
      "--format olmo-core --force");  // 92 GiB on an 80 GiB GPU: the export's form is what is checked
  CHECK(r.exit_code == 0);
  CheckGolden("ranks_mixtral_olmo_core.txt", r.out);
}

// A folded layout (ep 8 = dp_shard 2 x cp 2 x tp 2) of DeepSeek-V3 on 64
// GPUs, as torchtitan runs it: ring CP, FSDP2, DeepEP, an uneven split. It
// does not fit in memory on 64 H100s (--force): the export's form is what
// is checked.
const char* const kTorchtitanGoldenArgs =
    "ranks --cluster h100-dgx-16n --gpus 64 --model deepseek-v3 --force --layout "
    "tp=2,cp=2,pp=4,ep=8,etp=1,cp_style=ring,fsdp=true,recompute=full,dispatcher=deepep";

TEST_CASE("ranks --format torchtitan: a Python module returning Trainer.Config") {
  auto r = RunFoldplan(std::string(kTorchtitanGoldenArgs) + " --format torchtitan");
  CHECK(r.exit_code == 0);
  CheckGolden("ranks_w64_torchtitan.py", r.out);
}

TEST_CASE("ranks --format torchtitan-toml: the [parallelism] table of the releases with TOML configs") {
  auto r = RunFoldplan(std::string(kTorchtitanGoldenArgs) + " --format torchtitan-toml");
  CHECK(r.exit_code == 0);
  CheckGolden("ranks_w64_torchtitan.toml", r.out);
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

TEST_CASE("explain a DeepSeek-V3 recipe: MXFP8, HybridEP, Megatron's pipeline layout, MTP") {
  auto r = RunFoldplan("explain --recipe deepseek-v3-gb200-tp1-pp8-vpp4-ep32-mxfp8");
  CHECK(r.exit_code == 0);
  CheckGolden("explain_recipe_deepseek_v3.txt", r.out);
}

TEST_CASE("explain a Qwen3-235B recipe: recompute modules, DeepEP, a chosen pipeline layout") {
  auto r = RunFoldplan("explain --recipe qwen3-235b-h100-tp2-pp8-vpp4-ep32");
  CHECK(r.exit_code == 0);
  CheckGolden("explain_recipe_qwen3_235b.txt", r.out);
}

TEST_CASE("plan --fix searches only the layouts that agree") {
  auto r = RunFoldplan("plan --model mixtral-8x7b --fix tp=2,pp=4,ep=8 --top 3 --json");
  CHECK(r.exit_code == 0);
  const auto plan = nlohmann::json::parse(r.out);
  REQUIRE(plan["candidates"].size() == 3);
  for (const auto& c : plan["candidates"]) {
    CHECK(c["layout"]["tp"] == 2);
    CHECK(c["layout"]["pp"] == 4);
    CHECK(c["layout"]["ep"] == 8);
  }
  auto all = RunFoldplan("plan --model mixtral-8x7b --top 3 --json");
  CHECK(nlohmann::json::parse(all.out)["search"]["candidates"] > plan["search"]["candidates"]);
}

TEST_CASE("plan on the shipped defaults") {
  auto r = RunFoldplan("plan --top 5");
  CHECK(r.exit_code == 0);
  CheckGolden("plan_default.txt", r.out);
}

TEST_CASE("plan --json and -o write the same foldplan.plan/v1 document") {
  const std::string path = "/tmp/foldplan_cli_plan_" + std::to_string(::getpid()) + ".json";
  auto r = RunFoldplan("plan --model mixtral-8x7b --top 3 --json -o " + path);
  CHECK(r.exit_code == 0);
  const auto printed = nlohmann::json::parse(r.out);
  const auto written = nlohmann::json::parse(foldplan::testing::Slurp(path));
  std::remove(path.c_str());
  CHECK(printed == written);
  CHECK(printed["schema"] == "foldplan.plan/v1");
  REQUIRE(printed["candidates"].size() == 3);
  const auto& best = printed["candidates"][0];
  for (const char* key : {"layout", "step_time_s", "tokens_per_s", "mfu", "memory", "comm"}) {
    CHECK_MESSAGE(best.contains(key), key);
  }
  for (const char* key : {"tp", "cp", "dp", "pp", "vpp", "ep", "etp", "edp", "mbs", "order", "cp_style", "recompute"}) {
    CHECK_MESSAGE(best["layout"].contains(key), key);
  }
  CHECK(best["memory"].contains("peak_gib"));
  CHECK(printed["candidates"][0]["step_time_s"] <= printed["candidates"][1]["step_time_s"]);
  CHECK(printed["rank_map"]["schema"] == "foldplan.rankmap/v1");
  CHECK(printed["rank_map"]["layout"] == best["layout"]["text"]);
  CHECK(printed["inputs"]["model"]["spec"]["schema"] == "foldplan.model/v1");
}

TEST_CASE("plan --objective memory puts the smallest peak first") {
  auto r = RunFoldplan("plan --model mixtral-8x7b --top 4 --objective memory --json");
  CHECK(r.exit_code == 0);
  const auto plan = nlohmann::json::parse(r.out);
  double last = 0;
  for (const auto& c : plan["candidates"]) {
    CHECK(c["memory"]["peak_gib"].get<double>() >= last);
    last = c["memory"]["peak_gib"].get<double>();
  }
}

TEST_CASE("explain one layout") {
  auto r = RunFoldplan("explain --model mixtral-8x7b --layout tp=2,cp=1,pp=4,ep=8,etp=1,recompute=selective");
  CHECK(r.exit_code == 0);
  CheckGolden("explain_mixtral_8x7b.txt", r.out);
}

TEST_CASE("explain an illegal layout lists every reason and exits 1") {
  auto r = RunFoldplan("explain --model mixtral-8x7b --layout tp=16,cp=1,pp=8,ep=16,etp=1");
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("ILLEGAL: this layout breaks 2 rules") != std::string::npos);
  CHECK(r.out.find("tp_divides_kv_heads") != std::string::npos);
  CHECK(r.out.find("ep_divides_experts") != std::string::npos);
}

TEST_CASE("explain -o writes a plan file holding just that layout") {
  const std::string path = "/tmp/foldplan_cli_explain_" + std::to_string(::getpid()) + ".json";
  auto r = RunFoldplan("explain --model mixtral-8x7b --layout tp=2,cp=1,pp=4,ep=8,etp=1 -o " + path);
  CHECK(r.exit_code == 0);
  const auto plan = nlohmann::json::parse(foldplan::testing::Slurp(path));
  std::remove(path.c_str());
  CHECK(plan["schema"] == "foldplan.plan/v1");
  CHECK(plan["objective"] == "explain");
  REQUIRE(plan["candidates"].size() == 1);
  CHECK(plan["candidates"][0]["layout"]["tp"] == 2);
  CHECK(plan["rank_map"]["world_size"] == 128);
}
