// `foldplan report` end to end: the page is written and self-contained;
// usage errors exit 2; bad inputs exit 1 naming the file and the field.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tests/cli_run.h"
#include "tests/text_count.h"

namespace foldplan {
namespace {

using testing::RunFoldplan;
using testing::Slurp;

const std::string kPlanFlag = " --plan tests/data/validate/pp2_cp2_ep4.plan.json";

using foldplan::testing::Count;

TEST_CASE("cli report: the fixture plan with its measurements makes one page, every rank once, nothing loaded") {
  const std::string out = "/tmp/foldplan_cli_report_test.html";
  const auto run =
      RunFoldplan("report" + kPlanFlag + " --measurements tests/data/inputs/measurements_pp2_cp2_ep4.json -o " + out);
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(run.err.find("wrote " + out) != std::string::npos);
  const std::string html = Slurp(out);
  // 8 ranks on a 16-node cluster of 8 GPUs: 8 rank cells, 120 idle.
  for (int r = 0; r < 8; ++r) CHECK(Count(html, "data-rank=\"" + std::to_string(r) + "\"") == 1);
  CHECK(Count(html, "data-rank=") == 8);
  CHECK(Count(html, "data-idle=") == 120);
  // rank map, scatter, step bar, memory bar, predicted-vs-measured.
  CHECK(Count(html, "<svg ") == 5);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("href=") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("Measured against predicted") != std::string::npos);
}

TEST_CASE("cli report: usage errors exit 2") {
  const auto no_output = RunFoldplan("report" + kPlanFlag);
  CHECK(no_output.exit_code == 2);
  const auto bad_kind = RunFoldplan("report" + kPlanFlag + " --color-by tp_ep -o /tmp/foldplan_cli_report_x.html");
  CHECK(bad_kind.exit_code == 2);
  CHECK(bad_kind.err.find("--color-by: expected one of tp, cp, dp, ep, edp, pp, stage, got 'tp_ep'") !=
        std::string::npos);
  const auto bad_max = RunFoldplan("report" + kPlanFlag + " --max-gpus 0 -o /tmp/foldplan_cli_report_x.html");
  CHECK(bad_max.exit_code == 2);
}

TEST_CASE("cli report: measurements of another layout and a bad simulation file exit 1 naming them") {
  const auto other = RunFoldplan("report --plan tests/data/validate/tp2_cp2_ep2_etp2.plan.json "
                                 "--measurements tests/data/inputs/measurements_pp2_cp2_ep4.json -o /tmp/foldplan_cli_report_x.html");
  CHECK(other.exit_code == 1);
  CHECK(other.err.find("measurements_pp2_cp2_ep4.json was measured for layout") != std::string::npos);
  const std::string sim = "/tmp/foldplan_cli_report_sim.json";
  std::ofstream(sim) << R"({"schema": "foldplan.simulation/v1", "layout": "x", "schedule": "1f1b"})";
  const auto bad = RunFoldplan("report" + kPlanFlag + " --simulation " + sim + " -o /tmp/foldplan_cli_report_x.html");
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find(sim + ": /simulated") != std::string::npos);
}

TEST_CASE("cli report: a simulation of another layout is refused, exit 1, naming the file and both layouts") {
  const std::string sim = "/tmp/foldplan_cli_report_other_sim.json";
  std::ofstream(sim) << R"({"schema": "foldplan.simulation/v1", "layout": "tp=2,cp=1,dp=4,pp=1,ep=8,etp=1,edp=1,world=8",
    "schedule": "1f1b", "simulated": {"step_time_s": 1}, "analytical": {"step_time_s": 1},
    "critical_path": {"segments": []}, "memory_timeline": []})";
  const std::string out = "/tmp/foldplan_cli_report_other.html";
  std::remove(out.c_str());
  const auto run = RunFoldplan("report" + kPlanFlag + " --simulation " + sim + " -o " + out);
  CHECK(run.exit_code == 1);
  CHECK(run.err.find(sim + ": /layout: the simulation is of layout tp=2,cp=1,dp=4") != std::string::npos);
  CHECK(run.err.find("pp2_cp2_ep4.plan.json's best layout is tp=1,cp=2,dp=2,pp=2") != std::string::npos);
  CHECK_FALSE(std::ifstream(out).good());
}

TEST_CASE("cli report: a rank map given as the plan is refused at its schema") {
  const std::string ranks = "/tmp/foldplan_cli_report_ranks.json";
  const auto export_run =
      RunFoldplan("ranks --plan tests/data/validate/pp2_cp2_ep4.plan.json --format rankmap --force -o " + ranks);
  REQUIRE_MESSAGE(export_run.exit_code == 0, export_run.err);
  const auto run = RunFoldplan("report --plan " + ranks + " -o /tmp/foldplan_cli_report_x.html");
  CHECK(run.exit_code == 1);
  CHECK(run.err.find(ranks + ": /schema: expected") != std::string::npos);
}

TEST_CASE("cli report: --color-by stage colours the fixture's ranks by pipeline stage") {
  const std::string out = "/tmp/foldplan_cli_report_stage.html";
  const auto run = RunFoldplan("report" + kPlanFlag + " --color-by stage -o " + out);
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const std::string html = Slurp(out);
  // pp 2 over 8 ranks, pp outermost: ranks 0..3 stage 0, 4..7 stage 1.
  for (int r = 0; r < 8; ++r) {
    CAPTURE(r);
    CHECK(Count(html, "data-rank=\"" + std::to_string(r) + "\" data-group=\"" + std::to_string(r / 4) + "\"") == 1);
  }
  CHECK(html.find("pipeline stage</b> (2 stages of 4 ranks") != std::string::npos);
}

}  // namespace
}  // namespace foldplan
