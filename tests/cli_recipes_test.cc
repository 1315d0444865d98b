// Every shipped recipe is a run that completed: with its settings the
// planner must find its layout legal and fitting in memory (a recipe that
// relies on what foldplan does not model, such as activation offloading, is
// set aside for the memory check and says so), and must export it to
// Megatron flags without refusal.
#include "cli_run.h"

#include <unistd.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "inputs/loader.h"
#include "inputs/recipe.h"

using foldplan::testing::RunFoldplan;
using foldplan::testing::Slurp;

TEST_CASE("every shipped recipe is legal, fits (offloading aside), and exports to Megatron") {
  auto shipped = foldplan::ListShipped(foldplan::InputKind::kRecipe);
  REQUIRE(shipped.ok());
  REQUIRE(shipped->size() >= 11);  // the public recipes of the reference, one per run
  for (const auto& s : shipped.value()) {
    CAPTURE(s.name);
    auto recipe = foldplan::LoadRecipe(s.path);
    REQUIRE_MESSAGE(recipe.ok(), recipe.status().message());
    const std::string path = "/tmp/foldplan_recipe_" + std::to_string(::getpid()) + ".json";
    // A recipe foldplan does not fully model may not fit: its plan is written all the same.
    auto r = RunFoldplan("explain --recipe " + s.name + " -o " + path + (recipe->fully_modelled() ? "" : " --allow-oom"));
    CHECK_MESSAGE(r.exit_code == 0, r.err);
    const auto plan = nlohmann::json::parse(Slurp(path));
    std::remove(path.c_str());
    const auto& candidate = plan["candidates"][0];
    CHECK(candidate["violations"].empty());
    if (recipe->fully_modelled()) {
      CHECK_MESSAGE(candidate["memory"]["fits"] == true,
                    "peak " << candidate["memory"]["peak_gib"] << " GiB of " << candidate["memory"]["hbm_gib"]);
    } else {
      CHECK(r.err.find("which foldplan does not model") != std::string::npos);
    }
    CHECK_MESSAGE(plan.contains("megatron_args"), plan.value("megatron_error", std::string()));
  }
}

TEST_CASE("plan --recipe ranks the recipe's layout against the search") {
  auto r = RunFoldplan("plan --recipe mixtral-8x7b-h100-tp1-pp4-vpp8-ep8 --top 3");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("recipe mixtral-8x7b-h100-tp1-pp4-vpp8-ep8: cluster h100-dgx-128n") != std::string::npos);
  CHECK(r.out.find("the recipe's layout (tp1 cp1 dp16 pp4x8 | ep8 etp1 edp2") != std::string::npos);
  CHECK(r.out.find("fitting layouts") != std::string::npos);
  r = RunFoldplan("plan --recipe mixtral-8x7b-h100-tp1-pp4-vpp8-ep8 --model mixtral-8x22b");
  CHECK(r.exit_code == 2);  // flags that exclude each other: usage
  CHECK(r.err.find("--model with --recipe") != std::string::npos);
}

TEST_CASE("ranks --recipe exports the recipe's layout with its model's and job's flags") {
  // DeepSeek-V3 on GB200: one MTP layer, HybridEP with 16 SMs, mxfp8, the
  // source's pipeline layout with the MTP layer placed on the last stage.
  auto r = RunFoldplan("ranks --recipe deepseek-v3-gb200-tp1-pp8-vpp4-ep32-mxfp8 --format megatron");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  for (const char* flag : {"--expert-model-parallel-size 32 ", "--pipeline-model-parallel-layout \"Et|(tt|)*30mL\"",
                           "--fp8-recipe mxfp8", "--moe-flex-dispatcher-backend hybridep", "--moe-flex-dispatcher-num-sms 16",
                           "--mtp-num-layers 1", "--recompute-modules moe_act layernorm mla_up_proj"}) {
    CHECK_MESSAGE(r.out.find(flag) != std::string::npos, flag);
  }
  CHECK(r.err.find("no --model") == std::string::npos);  // the recipe's model was checked

  r = RunFoldplan("ranks --recipe deepseek-v3-gb200-tp1-pp8-vpp4-ep32-mxfp8 --world-size 256");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--world-size with --recipe") != std::string::npos);
  r = RunFoldplan("ranks --format megatron");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("ranks needs --layout (or --recipe") != std::string::npos);
}
