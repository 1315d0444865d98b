// `foldplan simulate` and `plan --simulate-top` end to end: golden outputs
// for shipped layouts (a change in predicted time shows as a reviewed
// diff), one small trace, and the refusals.
#include "cli_run.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/simulate_command.h"

using foldplan::ShowSimulateProgress;
using foldplan::SimulateProgressLine;
using foldplan::testing::CheckGolden;
using foldplan::testing::CliRun;
using foldplan::testing::ExpectUsage;
using foldplan::testing::RunFoldplan;
using foldplan::testing::Slurp;
using foldplan::testing::TempPath;

namespace {

// Floating-point figures to 6 significant digits, so that a golden holds
// what the models predict, not the last bits a compiler's contractions move.
nlohmann::ordered_json Rounded(const nlohmann::ordered_json& j) {
  if (j.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", j.get<double>());
    return std::stod(buf);
  }
  if (j.is_object() || j.is_array()) {
    nlohmann::ordered_json out = j;
    for (auto it = out.begin(); it != out.end(); ++it) *it = Rounded(*it);
    return out;
  }
  return j;
}


}  // namespace

TEST_CASE("simulate a 1F1B layout: the table beside the analytical model") {
  auto r = RunFoldplan("simulate --model mixtral-8x7b --layout tp=2,cp=1,pp=4,ep=8,etp=1 --global-batch 128");
  CHECK(r.exit_code == 0);
  CheckGolden("simulate_mixtral_8x7b.txt", r.out);
}

TEST_CASE("simulate an interleaved layout with EP overlap as JSON: simulated and analytical figures") {
  auto r = RunFoldplan(
      "simulate --model mixtral-8x7b --layout tp=2,cp=1,pp=2,vpp=2,ep=8,etp=1,a2a_overlap=1 --global-batch 64 --json");
  CHECK(r.exit_code == 0);
  const auto j = nlohmann::ordered_json::parse(r.out);
  CheckGolden("simulate_mixtral_8x7b_interleaved.json", Rounded(j).dump(1) + "\n");
  CHECK(j["schema"] == "foldplan.simulation/v1");
  for (const char* side : {"simulated", "analytical"}) {
    for (const char* key : {"step_time_s", "tokens_per_s", "mfu", "model_flops_per_token", "breakdown"}) {
      CHECK_MESSAGE(j[side].contains(key), side << " lacks " << key);
    }
  }
  CHECK(j.contains("critical_path"));
  CHECK(j["memory_timeline"].size() == 2);
}

TEST_CASE("simulate DeepSeek-V3's recipe with routing imbalance, every rank") {
  auto r = RunFoldplan(
      "simulate --model deepseek-v3 --cluster h100-dgx-16n --layout tp=1,cp=1,pp=8,ep=16,etp=1 --global-batch 128 "
      "--imbalance zipf:1 --seed 5 --json");
  CHECK(r.exit_code == 0);
  const auto j = nlohmann::ordered_json::parse(r.out);
  CHECK(j["simulated"]["ranks"].size() == 128);
  CHECK(j["simulated"]["step_time_s"].get<double>() > j["analytical"]["step_time_s"].get<double>());
  // The figures, not the 128 timelines: a summary is the golden.
  nlohmann::ordered_json summary;
  for (const char* side : {"simulated", "analytical"}) {
    summary[side]["step_time_s"] = j[side]["step_time_s"];
    summary[side]["breakdown"] = j[side]["breakdown"];
  }
  CheckGolden("simulate_deepseek_v3_zipf.json", Rounded(summary).dump(1) + "\n");
}

TEST_CASE("simulate --trace writes a Perfetto-readable trace, limited to the ranks asked for") {
  const std::string path = TempPath("trace.json");
  auto r = RunFoldplan("simulate --model mixtral-8x7b --layout tp=8,cp=1,pp=2,ep=8,etp=1 --global-batch 16 --trace " +
                       path + " --trace-ranks 1");
  CHECK(r.exit_code == 0);
  const std::string trace = Slurp(path);
  std::remove(path.c_str());
  CheckGolden("simulate_trace_small.json", trace);
  const auto j = nlohmann::json::parse(trace);
  CHECK(j["otherData"]["schema"] == "foldplan.trace/v1");
  for (const auto& e : j["traceEvents"]) CHECK(e["pid"] == 1);
}

TEST_CASE("plan --simulate-top re-ranks the analytical best by simulated step time") {
  auto r = RunFoldplan("plan --model mixtral-8x7b --global-batch 128 --top 3 --simulate-top 3");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("simulated re-ranking of the analytical top 3") != std::string::npos);
  auto j = RunFoldplan("plan --model mixtral-8x7b --global-batch 128 --top 3 --simulate-top 3 --json");
  CHECK(j.exit_code == 0);
  const auto plan = nlohmann::json::parse(j.out);
  REQUIRE(plan["simulation"].size() == 3);
  CHECK(plan["simulation"][0]["simulated_rank"] == 1);
}

TEST_CASE("simulate refuses bad flags with exit 2 and bad inputs with exit 1, naming what is wrong") {
  auto none = RunFoldplan("simulate");
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("simulate needs --layout") != std::string::npos);
  auto overlap = RunFoldplan("simulate --layout tp=2,cp=1,pp=4,ep=8,etp=1 --overlap tp=2");
  CHECK(overlap.exit_code == 2);
  CHECK(overlap.err.find("--overlap: expected all, none or KEY=0|1") != std::string::npos);
  auto schedule = RunFoldplan("simulate --layout tp=2,cp=1,pp=4,ep=8,etp=1 --schedule pipedream");
  CHECK(schedule.exit_code == 2);
  CHECK(schedule.err.find("--schedule: expected") != std::string::npos);
  auto ranks = RunFoldplan("simulate --layout tp=2,cp=1,pp=4,ep=8,etp=1 --trace /dev/null --trace-ranks 4");
  CHECK(ranks.exit_code == 2);
  CHECK(ranks.err.find("--trace-ranks: expected simulated ranks 0..3 (the pipeline ranks") != std::string::npos);
  auto imbalance = RunFoldplan("simulate --layout tp=2,cp=1,pp=4,ep=8,etp=1 --imbalance /nonexistent/loads.json");
  CHECK(imbalance.exit_code == 1);
  CHECK(imbalance.err.find("/nonexistent/loads.json") != std::string::npos);
  // DualPipeV needs vpp 2: the schedule_needs rule says so.
  auto dualpipe = RunFoldplan("simulate --layout tp=2,cp=1,pp=4,ep=8,etp=1 --schedule dualpipev");
  CHECK(dualpipe.exit_code == 1);
  CHECK(dualpipe.err.find("schedule_needs") != std::string::npos);
}

TEST_CASE("simulate --plan takes a plan file's inputs and candidate; a missing candidate names /candidates") {
  const std::string path = TempPath("plan.json");
  auto p = RunFoldplan("plan --model mixtral-8x7b --global-batch 128 --top 2 -o " + path);
  REQUIRE(p.exit_code == 0);
  auto a = RunFoldplan("simulate --plan " + path + " --candidate 1");
  CHECK(a.exit_code == 0);
  CHECK(a.out.find("simulated  analytical") != std::string::npos);
  auto b = RunFoldplan("simulate --plan " + path + " --candidate 5");
  CHECK(b.exit_code == 1);
  CHECK(b.err.find("/candidates: expected a candidate #5 (the file has 2, numbered from 1)") != std::string::npos);
  CHECK(RunFoldplan("simulate --plan " + path + " --candidate 0").exit_code == 2);
  std::remove(path.c_str());
}

TEST_CASE("simulate refuses a run whose estimate exceeds --max-tasks, before building it") {
  // The flag's largest global batch: 524,288 micro-batches on pp 4, about
  // 562 M task slots; refused at once with the estimate and the flag.
  const CliRun r = RunFoldplan(
      "simulate --model mixtral-8x7b --layout tp=1,cp=1,pp=4,ep=8,etp=1 --global-batch 16777216", 60);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("M task slots") != std::string::npos);
  CHECK(r.err.find("--max-tasks") != std::string::npos);
  CHECK(r.out.empty());
  // A limit below the default run's size refuses it too; the default runs.
  const CliRun small = RunFoldplan("simulate --model mixtral-8x7b --layout tp=2,cp=1,pp=4,ep=8,etp=1 --max-tasks 1000");
  CHECK(small.exit_code == 1);
  CHECK(small.err.find("above the limit of 1,000 task slots") != std::string::npos);
  ExpectUsage("simulate --model mixtral-8x7b --layout tp=2,cp=1,pp=4,ep=8,etp=1 --max-tasks 0", "--max-tasks");
}

TEST_CASE("simulate prints no progress when stderr is not a terminal") {
  // Tests run with stderr a pipe: not a byte of progress, even on a run of
  // more than a second.
  const CliRun r = RunFoldplan("simulate --model mixtral-8x7b --layout tp=2,cp=1,pp=4,ep=8,etp=1 --whole");
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("simulate: ") == std::string::npos);
  CHECK(r.err.find('\r') == std::string::npos);
}

TEST_CASE("simulate's progress: shown on a terminal after a second, one line rewriting itself") {
  CHECK_FALSE(ShowSimulateProgress(false, 30.0));
  CHECK_FALSE(ShowSimulateProgress(true, 0.5));
  CHECK(ShowSimulateProgress(true, 1.0));
  CHECK(SimulateProgressLine("running the step", 0.456, 12.3) == "\rsimulate: running the step 46% (12 s)");
  CHECK(SimulateProgressLine("building the step", 1.7, 2) == "\rsimulate: building the step 100% (2 s)");
}

TEST_CASE("simulate under imbalance shows each stage's highest memory peak and the rows its rank received") {
  const CliRun r = RunFoldplan(
      "simulate --model mixtral-8x7b --layout tp=2,cp=1,pp=4,ep=8,etp=1 --imbalance zipf:1 --json");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  double most = 0, least = 1e300;
  for (const auto& m : j["memory_timeline"]) {
    REQUIRE(m.contains("received_over_costed"));
    most = std::max(most, m["peak_bytes"].get<double>() - m["model_peak_bytes"].get<double>());
    least = std::min(least, m["peak_bytes"].get<double>() - m["model_peak_bytes"].get<double>());
  }
  // Ranks differ: those receiving more rows peak higher than those receiving fewer.
  CHECK(most > least + 1e6);
  const CliRun text = RunFoldplan("simulate --model mixtral-8x7b --layout tp=2,cp=1,pp=4,ep=8,etp=1 --imbalance zipf:1");
  CHECK(text.out.find("its highest memory peak under the imbalance") != std::string::npos);
}
