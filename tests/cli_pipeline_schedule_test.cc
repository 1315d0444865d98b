// The pipeline schedule end to end: `schedule=` in --layout and --fix reaches
// the layout, the pipeline description, the rules and the exports.
#include "cli_run.h"
#include "text_count.h"

#include <nlohmann/json.hpp>

using foldplan::testing::Contains;
using foldplan::testing::RunFoldplan;

TEST_CASE("explain --layout with schedule=dualpipev runs the V and names it") {
  const auto r = RunFoldplan(
      "explain --model mixtral-8x7b --layout tp=2,cp=1,pp=4,vpp=2,ep=8,etp=1,schedule=dualpipev --allow-oom");
  CHECK_MESSAGE(r.exit_code == 0, r.err);
  CHECK(Contains(r.out, ",vpp=2,schedule=dualpipev,mbs=1,"));
  CHECK(Contains(r.out, "pipeline     dualpipev, "));
}

TEST_CASE("ranks exports a named schedule to torchtitan and refuses it for Megatron") {
  // torchtitan's data parallelism is FSDP2: fsdp=1.
  const std::string layout = "--world-size 16 --layout tp=1,cp=1,pp=2,vpp=2,ep=4,etp=1,fsdp=1,schedule=dualpipev";
  auto r = RunFoldplan("ranks " + layout + " --format torchtitan");
  CHECK_MESSAGE(r.exit_code == 0, r.err);
  CHECK(Contains(r.out, "pipeline_parallel_schedule=\"DualPipeV\""));
  r = RunFoldplan("ranks " + layout + " --format torchtitan-toml");
  CHECK_MESSAGE(r.exit_code == 0, r.err);
  CHECK(Contains(r.out, "pipeline_parallel_schedule = \"DualPipeV\""));
  r = RunFoldplan("ranks " + layout + " --format megatron");
  CHECK(r.exit_code == 1);
  CHECK(Contains(r.err, "it has no flag for dualpipev"));
}

TEST_CASE("explain --json carries the named schedule in the layout and the pipeline") {
  const auto r =
      RunFoldplan("explain --model mixtral-8x7b --layout tp=2,cp=1,pp=4,ep=8,etp=1,schedule=zb --json --allow-oom");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto c = nlohmann::json::parse(r.out);  // the one candidate
  CHECK(c["layout"]["schedule"] == "zb-h1");
  CHECK(c["pipeline"]["schedule"] == "zb-h1");
}

TEST_CASE("explain --json carries the host per pipeline rank and micro-batch, the slowest stage's in the step") {
  const auto r = RunFoldplan("explain --model mixtral-8x7b --layout tp=2,cp=1,pp=4,ep=8,etp=1 --json --allow-oom");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto c = nlohmann::json::parse(r.out);
  REQUIRE(c["host_per_stage"].size() == 4);
  const auto& step = c["step"];
  const auto& slowest = c["host_per_stage"][step["slowest_stage"].get<int>()];
  CHECK(step["stage_host_exposed_s"] == slowest["exposed_s"]);
  CHECK(step["stage_launches"] == slowest["launches"]);
  // Mixtral's 8 MoE layers per rank: one sync each per forward.
  CHECK(slowest["syncs"] == 8);
  CHECK(slowest["host_s"].get<double>() > 0);
  CHECK(step["host_step_s"].get<double>() == doctest::Approx(2 * 21.1e-6));
}

TEST_CASE("an illegal schedule is refused with the schedule_needs rule; an unknown one with the names") {
  auto r = RunFoldplan("explain --model mixtral-8x7b --layout tp=2,cp=1,pp=4,ep=8,etp=1,schedule=dualpipev");
  CHECK(r.exit_code != 0);
  CHECK(Contains(r.out + r.err, "schedule_needs: dualpipev runs exactly two model chunks per rank"));
  r = RunFoldplan("explain --model mixtral-8x7b --layout tp=2,pp=4,schedule=dualpipe");
  CHECK(r.exit_code == 2);
  CHECK(Contains(r.err, "expected one of 1f1b, interleaved-1f1b (alias interleaved), gpipe, zb-h1 (alias zb), dualpipev"));
}

TEST_CASE("enumerate --fix schedule= pins the schedule and counts the layouts it does not fit") {
  const auto r = RunFoldplan("enumerate --model mixtral-8x7b --fix pp=4,schedule=dualpipev --json --limit 0");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const auto e = nlohmann::json::parse(r.out);
  CHECK(e["rejected"]["schedule_needs"].get<long long>() > 0);
  REQUIRE(e["legal_count"].get<long long>() > 0);
  for (const auto& l : e["layouts"]) {
    CHECK(l["schedule"] == "dualpipev");
    CHECK(l["vpp"] == 2);
  }
}
