// The report's readers: errors name the file and the JSON pointer.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "report/report_inputs.h"

namespace foldplan {
namespace {

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = "/tmp/foldplan_report_test_" + name;
  std::ofstream(path) << text;
  return path;
}

TEST_CASE("report inputs: a simulation file of another schema is refused naming file and field") {
  const std::string path = Write("sim_schema.json", R"({"schema": "foldplan.plan/v1"})");
  auto sim = ReadSimulation(path);
  REQUIRE_FALSE(sim.ok());
  CHECK(sim.status().message().find(path + ": /schema") != std::string::npos);
  CHECK(sim.status().message().find("foldplan.simulation/v1") != std::string::npos);
}

TEST_CASE("report inputs: a bad memory point names its pointer") {
  const std::string path = Write("sim_points.json", R"({"schema": "foldplan.simulation/v1", "layout": "tp=1",
    "schedule": "1f1b", "simulated": {"step_time_s": 1}, "analytical": {"step_time_s": 1},
    "critical_path": {"segments": []},
    "memory_timeline": [{"rank": 0, "pipeline_rank": 0, "peak_bytes": 1, "model_peak_bytes": 1,
                         "points": [[0, 1], [0.5, "x"]]}]})");
  auto sim = ReadSimulation(path);
  REQUIRE_FALSE(sim.ok());
  CHECK(sim.status().message().find(path + ": /memory_timeline/0/points/1: expected [seconds, bytes]") !=
        std::string::npos);
}

TEST_CASE("report inputs: a plan candidate without its step names the pointer") {
  const std::string path = Write("plan_step.json", R"({"schema": "foldplan.plan/v1", "objective": "throughput",
    "inputs": {"cluster": {"name": "c"}, "model": {"name": "m"}, "job": {"name": "j"}},
    "candidates": [{"layout": {"text": "tp=1"}, "step_time_s": 1, "tokens_per_s": 1, "mfu": 0.1}]})");
  auto plan = ReadPlanSummary(path);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().message().find(path + ": /candidates/0/step") != std::string::npos);
}

}  // namespace
}  // namespace foldplan
