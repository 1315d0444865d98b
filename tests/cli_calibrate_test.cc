// `foldplan calibrate` and `foldplan collective` end to end on the
// nccl-tests fixtures (tests/data/nccl_tests/, synthetic logs in nccl-tests'
// format), and the calibration they write used by collective and plan.
#include <doctest/doctest.h>

#include <cstdio>
#include <sstream>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "costmodel/collective.h"
#include "costmodel/comm_params.h"
#include "inputs/loader.h"
#include "topology/topology.h"
#include "tests/text_count.h"

using foldplan::testing::RunFoldplan;
using foldplan::testing::Slurp;

namespace {

const std::string kLogs = "tests/data/nccl_tests/";
const std::string kCal = "/tmp/foldplan_cli_calibrate_test.calibration.json";

// The report line of a series: starts with the collective, then its ranks and class.
bool HasRow(const std::string& text, const std::string& collective, const std::string& ranks, const std::string& placement) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string c, r, p;
    if (words >> c >> r >> p && c == collective && r == ranks && p == placement) return true;
  }
  return false;
}

using foldplan::testing::Count;

}  // namespace

TEST_CASE("calibrate fits nccl-tests logs, one series each, and writes a v2 file") {
  const auto run = RunFoldplan("calibrate --nccl-tests " + kLogs + "all_reduce_perf_h100x8.log " + kLogs +
                               "alltoall_perf_2x8_mpi.log -o " + kCal + " --report");
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("measured on NVIDIA H100 80GB HBM3") != std::string::npos);
  CHECK(HasRow(run.out, "all_reduce", "8", "intra_domain"));
  CHECK(HasRow(run.out, "all_to_all", "16", "inter_domain"));
  // The fixtures are exact alpha-beta lines (their README): the held-out error is 0.
  CHECK(run.out.find("fit median 0.0%, max 0.0%") != std::string::npos);
  CHECK(run.out.find("all held-out points") != std::string::npos);
  CHECK(run.err.find("wrote " + kCal) != std::string::npos);
  const nlohmann::json file = nlohmann::json::parse(Slurp(kCal));
  CHECK(file["schema"] == "foldplan.calibration/v2");
  CHECK(file["gpu"] == "NVIDIA H100 80GB HBM3");
  REQUIRE(file["fits"].size() == 2);
  CHECK(file["provenance"]["inputs"][0]["sha256"].get<std::string>().size() == 64);
  CHECK(file["provenance"]["hosts"] == nlohmann::json({"node01", "node02"}));
  CHECK(file["holdout"]["share"] == 0.25);

  const auto json = RunFoldplan("calibrate --nccl-tests " + kLogs + "all_reduce_perf_h100x8.log --json");
  REQUIRE(json.exit_code == 0);
  const nlohmann::json report = nlohmann::json::parse(json.out);
  CHECK(report["schema"] == "foldplan.calibration-report/v1");
  CHECK(report["series"][0]["held_out_error"]["fit"]["points"].get<int>() >= 1);
  CHECK(report["held_out_error"]["defaults"]["median"].get<double>() >= 0);
}

TEST_CASE("collective uses the fit where it has one and warns once where it has none") {
  REQUIRE(RunFoldplan("calibrate --nccl-tests " + kLogs + "all_reduce_perf_h100x8.log -o " + kCal).exit_code == 0);
  const auto fitted = RunFoldplan("collective --op all_reduce --ranks 8 --bytes 1K:1M --calibration " + kCal);
  REQUIRE(fitted.exit_code == 0);
  CHECK(Count(fitted.out, "calibrated\n") == 11);  // 1 KiB .. 1 MiB, doubling
  CHECK(fitted.err.empty());
  // Past the log's largest size (8 GiB): one warning that the fit was extended.
  const auto beyond = RunFoldplan("collective --op all_reduce --ranks 8 --bytes 4G:64G --calibration " + kCal);
  REQUIRE(beyond.exit_code == 0);
  CHECK(Count(beyond.err, "the fit for all_reduce on intra_domain groups was used past the largest size it measured") == 1);
  const auto other = RunFoldplan("collective --op all_reduce --ranks 16 --bytes 1K:1M --calibration " + kCal);
  REQUIRE(other.exit_code == 0);
  CHECK(Count(other.err, "has no fit for all_reduce on inter_domain groups") == 1);
  CHECK(Count(other.out, "calibrated") == 0);
}

TEST_CASE("plan with a calibration that covers one class warns once per class it lacks") {
  REQUIRE(RunFoldplan("calibrate --nccl-tests " + kLogs + "all_reduce_perf_h100x8.log -o " + kCal).exit_code == 0);
  const auto run = RunFoldplan("plan --calibration " + kCal + " --top 2", 120);
  REQUIRE(run.exit_code == 0);
  CHECK(Count(run.err, "has no fit for all_gather on intra_domain groups") == 1);
  CHECK(Count(run.err, "has no fit for all_to_all on intra_domain groups") <= 1);
  CHECK(Count(run.err, "has no fit for all_reduce on intra_domain") == 0);
}

TEST_CASE("collective prints the model's numbers in nccl-tests' conventions") {
  const auto run = RunFoldplan("collective --op all_reduce --ranks 8 --bytes 1M:4M --json");
  REQUIRE(run.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(run.out);
  CHECK(j["schema"] == "foldplan.collective/v1");
  CHECK(j["placement"] == "intra_domain");
  REQUIRE(j["rows"].size() == 3);
  // The same number as the library's, for 8 GPUs of node 0 of the default cluster.
  const foldplan::ClusterSpec cluster = foldplan::LoadCluster("h100-dgx-16n").value();
  const foldplan::Topology topo = foldplan::Topology::Build(cluster).value();
  const std::vector<int> gpus = {0, 1, 2, 3, 4, 5, 6, 7};
  const foldplan::CollectiveCost cost = foldplan::CollectiveTime(
      foldplan::Collective::kAllReduce, 1 << 20, topo.Span(gpus), foldplan::DefaultCommParams(cluster));
  CHECK(j["rows"][0]["bytes"] == 1 << 20);
  CHECK(j["rows"][0]["time_us"].get<double>() == doctest::Approx(cost.seconds * 1e6));
  CHECK(j["rows"][0]["busbw_gb_per_s"].get<double>() == doctest::Approx(cost.algbw_gb_per_s * 2 * 7 / 8));
  CHECK(j["rows"][0]["algorithm"] == cost.algorithm);

  const auto text = RunFoldplan("collective --op all_to_all --ranks 16 --ranks-per-domain 4 --bytes 1K:4K");
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("all_to_all on 16 ranks, 4 per NVLink domain (inter_domain)") != std::string::npos);
  CHECK(text.out.find("#        size        time    algbw    busbw  algorithm") != std::string::npos);
  CHECK(Count(text.out, "alltoall/") == 3);
}

TEST_CASE("measurements with wrong elements, and truncated logs, are refused with file and line") {
  const auto wrong = RunFoldplan("calibrate --nccl-tests " + kLogs + "reduce_scatter_perf_wrong.log");
  CHECK(wrong.exit_code == 1);
  CHECK(wrong.err.find("reduce_scatter_perf_wrong.log:21:") != std::string::npos);
  const auto cut = RunFoldplan("calibrate --nccl-tests " + kLogs + "all_reduce_perf_truncated.log");
  CHECK(cut.exit_code == 1);
  CHECK(cut.err.find("all_reduce_perf_truncated.log:") != std::string::npos);
  const auto missing = RunFoldplan("calibrate --measurements /nonexistent.json");
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("/nonexistent.json") != std::string::npos);
  // A measurements file with a bad field: the JSON pointer.
  const std::string bad = "/tmp/foldplan_cli_calibrate_test.bad.json";
  std::FILE* f = std::fopen(bad.c_str(), "w");
  std::fputs(R"({"schema": "foldplan.measurements/v1", "environment": {"hosts": ["a"], "ranks": -1}})", f);
  std::fclose(f);
  const auto field = RunFoldplan("calibrate --measurements " + bad);
  CHECK(field.exit_code == 1);
  CHECK(field.err.find(bad + ": /environment/ranks") != std::string::npos);
  std::remove(bad.c_str());
}

TEST_CASE("calibrate and collective refuse bad flags with exit 2 before reading anything") {
  for (const std::string& args : {
           std::string("calibrate"),
           std::string("calibrate --nccl-tests x.log --holdout 0.7"),
           std::string("calibrate --nccl-tests x.log --holdout -0.1"),
           std::string("calibrate --nccl-tests x.log --max-segments 4"),
           std::string("calibrate --nccl-tests x.log --json --report"),
           std::string("collective --op broadcast --ranks 8"),
           std::string("collective --op all_reduce --ranks 1"),
           std::string("collective --op all_reduce --ranks 8 --bytes 8G:1K"),
           std::string("collective --op all_reduce --ranks 8 --bytes 2T"),
           std::string("collective --op all_reduce --ranks 8 --ranks-per-domain 9"),
           std::string("collective --op all_reduce"),
       }) {
    CAPTURE(args);
    const auto run = RunFoldplan(args);
    CHECK(run.exit_code == 2);
    CHECK_FALSE(run.err.empty());
  }
  // A group the cluster cannot hold is an answer (exit 1), not usage.
  CHECK(RunFoldplan("collective --op all_reduce --ranks 256 --cluster h200-dgx-1n").exit_code == 1);
}
