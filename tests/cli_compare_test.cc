// `foldplan compare`: foldbench's measurements of a plan beside the cost
// model's predictions, end to end through the binary.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli_run.h"

namespace foldplan {
namespace {

using testing::RunFoldplan;

const std::string kPlan = "--plan tests/data/validate/pp2_cp2_ep4.plan.json";
const std::string kMeasured = " --measurements tests/data/inputs/measurements_pp2_cp2_ep4.json";
const std::string kSweep = " --measurements tests/data/inputs/measurements_pp2_cp2_ep4_sweep.json";

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = "/tmp/foldplan_cli_compare_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

const nlohmann::json& Op(const nlohmann::json& doc, const std::string& op, const std::string& kind) {
  for (const auto& o : doc["ops"]) {
    if (o["op"] == op && o["group_kind"] == kind) return o;
  }
  FAIL("no op " << op << " over " << kind);
  static const nlohmann::json none;
  return none;
}

TEST_CASE("the ulysses, dispatch and pack measurements are compared op by op, then summarised") {
  const auto run = RunFoldplan("compare " + kPlan + kMeasured);
  CHECK_MESSAGE(run.exit_code == 0, run.err);
  CHECK(run.out.find("ulysses over cp groups of 2:") != std::string::npos);
  CHECK(run.out.find("dispatch over ep groups of 4:") != std::string::npos);
  CHECK(run.out.find("pack over cp groups of 2:") != std::string::npos);
  CHECK(run.out.find("  dispatch: median |relative error|") != std::string::npos);
  CHECK(run.out.find("\nsummary: median |relative error|") != std::string::npos);
  CHECK(run.out.find("over 8 cases") != std::string::npos);  // skewed dispatch left out
  CHECK(run.out.find("[not in the summary: skewed routing") != std::string::npos);
  // Host-memory measurements: a note, not an error.
  CHECK(run.out.find("note: tests/data/inputs/measurements_pp2_cp2_ep4.json was measured on the mpi backend") !=
        std::string::npos);
}

TEST_CASE("--json prints foldplan.comparison/v1 with every op, case and the summary") {
  const auto run = RunFoldplan("compare " + kPlan + kMeasured + " --json");
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const auto doc = nlohmann::json::parse(run.out);
  CHECK(doc["schema"] == "foldplan.comparison/v1");
  CHECK(doc["plan"] == "tests/data/validate/pp2_cp2_ep4.plan.json");
  CHECK(doc["measurements"] == "tests/data/inputs/measurements_pp2_cp2_ep4.json");
  CHECK(doc["calibration"] == "defaults");
  CHECK(doc["backend"] == "mpi");
  CHECK(doc["ops"].size() == 3);
  const auto& q = Op(doc, "ulysses", "cp")["cases"][0];
  CHECK(q["case"] == "q seq->heads");
  CHECK(q["bytes"] == 16777216);
  CHECK(q["measured_s"].get<double>() > 0);
  CHECK(q["predicted_s"].get<double>() > 0);
  CHECK(q["relative_error"].get<double>() ==
        doctest::Approx(q["predicted_s"].get<double>() / q["measured_s"].get<double>() - 1));
  CHECK(q["model"].get<std::string>().find("all_to_all") != std::string::npos);
  CHECK(q["in_summary"] == true);
  const auto& skewed = Op(doc, "dispatch", "ep")["cases"][1];
  CHECK(skewed["in_summary"] == false);
  CHECK(skewed.contains("excluded"));
  CHECK(doc["summary"]["cases"] == 8);
  CHECK(doc["summary"]["median_abs_relative_error"].get<double>() <=
        doc["summary"]["max_abs_relative_error"].get<double>());
}

TEST_CASE("a calibration fit for (all_reduce, 4 GPUs, intra_domain) sets that case's prediction to alpha + S / B") {
  const std::string cal = WriteTemp("cal.json", R"({"schema": "foldplan.calibration/v1",
    "fits": [{"collective": "all_reduce", "gpus": 4, "placement": "intra_domain",
              "segments": [{"alpha_us": 20, "algbw_gb_per_s": 100}]}]})");
  const auto run = RunFoldplan("compare " + kPlan + kSweep + " --json --calibration " + cal);
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const auto doc = nlohmann::json::parse(run.out);
  CHECK(doc["calibration"] == cal);
  const auto& k = Op(doc, "all_reduce", "dp_cp")["cases"][0];
  CHECK(k["bytes"] == 4096);
  CHECK(k["model"] == "calibrated");
  CHECK(k["predicted_s"].get<double>() == doctest::Approx(20e-6 + 4096 / 100e9).scale(0));
  // Without it, the model's algorithm (NCCL's): not that number.
  const auto plain = nlohmann::json::parse(RunFoldplan("compare " + kPlan + kSweep + " --json").out);
  const auto& d = Op(plain, "all_reduce", "dp_cp")["cases"][0];
  CHECK(d["model"] != "calibrated");
  CHECK(d["predicted_s"].get<double>() != doctest::Approx(20e-6 + 4096 / 100e9).scale(0));
  // The collectives it has no fit for are named on stderr.
  CHECK(run.err.find("has no fit for all_to_all") != std::string::npos);
  std::remove(cal.c_str());
}

TEST_CASE("the sweep ops are compared over every group kind they ran on") {
  // 6 collectives over 5 kinds, 2 sizes each.
  const auto run = RunFoldplan("compare " + kPlan + kSweep);
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  CHECK(run.out.find("send_recv over pp groups of 2:") != std::string::npos);
  CHECK(run.out.find("all_reduce over dp_cp groups of 4:") != std::string::npos);
  CHECK(run.out.find("over 60 cases") != std::string::npos);
  // One case recomputed from the model's formula (doc/cost-model-comm.md,
  // tests/costmodel_collective_test.cc "send/recv"): a 64 KiB send/recv
  // between two GPUs of one DGX H100 node is p2p Simple, 8.4 us base + one
  // NVLink hop of 3.4 us + S / the achieved NVLink 4 rate of 370.8 GB/s.
  const auto doc = nlohmann::json::parse(RunFoldplan("compare --json " + kPlan + kSweep).out);
  const auto& k = Op(doc, "send_recv", "pp")["cases"][1];
  CHECK(k["bytes"] == 65536);
  CHECK(k["model"] == "p2p/Simple");
  CHECK(k["predicted_s"].get<double>() == doctest::Approx(8.4e-6 + 3.4e-6 + 65536 / 370.8e9).scale(0));
}

TEST_CASE("measurements of another layout than the plan's best are refused, naming both files") {
  const auto run = RunFoldplan("compare --plan tests/data/validate/tp2_cp2_ep2_etp2.plan.json" + kMeasured);
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("tests/data/inputs/measurements_pp2_cp2_ep4.json was measured for layout tp=1,cp=2") !=
        std::string::npos);
  CHECK(run.err.find("tests/data/validate/tp2_cp2_ep2_etp2.plan.json's best layout is tp=2,cp=2") !=
        std::string::npos);
}

TEST_CASE("compute cases are compared at their GEMM shapes; an older file's layout text still matches") {
  const std::string plan = WriteTemp("olmoe.plan.json", "");
  const auto made = RunFoldplan(
      "explain --cluster h200-dgx-1n --model olmoe-1b-7b --gpus 8 --allow-oom -o " + plan +
      " --layout tp=1,cp=1,dp=8,pp=1,ep=8,etp=1,edp=1,vpp=1,mbs=1,order=tp-cp-ep-dp-pp");
  REQUIRE_MESSAGE(made.exit_code == 0, made.err);
  const auto run = RunFoldplan("compare --json --plan " + plan +
                               " --measurements tests/data/inputs/measurements_compute_synthetic.json");
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  const auto doc = nlohmann::json::parse(run.out);
  CHECK(doc["notes"].empty());  // the nccl backend
  const auto& cases = Op(doc, "compute", "world")["cases"];
  REQUIRE(cases.size() == 4);
  CHECK(cases[0]["model"].get<std::string>().rfind("grouped GEMM", 0) == 0);
  CHECK(cases[2]["model"].get<std::string>().rfind("GEMM", 0) == 0);
  CHECK(cases[0]["gemm"]["batch"] == 8);
  CHECK(doc["summary"]["cases"] == 4);
  std::remove(plan.c_str());
}

TEST_CASE("compare without --plan or --measurements is a usage error") {
  CHECK(RunFoldplan("compare" + kMeasured).exit_code == 2);
  CHECK(RunFoldplan("compare " + kPlan).exit_code == 2);
  CHECK(RunFoldplan("compare " + kPlan + kMeasured + " --bogus").exit_code == 2);
}

TEST_CASE("an unreadable plan or measurements file is invalid input, named") {
  const auto run = RunFoldplan("compare --plan tests/data/inputs/measurements_pp2_cp2_ep4.json" + kMeasured);
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("tests/data/inputs/measurements_pp2_cp2_ep4.json: /schema") != std::string::npos);
}

}  // namespace
}  // namespace foldplan
