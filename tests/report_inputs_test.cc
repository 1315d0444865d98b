// The report's readers: errors name the file and the JSON pointer.
#include <doctest/doctest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <fstream>
#include <string>

#include "report/json_stream.h"
#include "report/report_inputs.h"

namespace foldplan {
namespace {

std::string ReportInputsWrite(const std::string& name, const std::string& text) {
  const std::string path = "/tmp/foldplan_report_test_" + name;
  std::ofstream(path) << text;
  return path;
}

TEST_CASE("report inputs: a simulation file of another schema is refused naming file and field") {
  const std::string path = ReportInputsWrite("sim_schema.json", R"({"schema": "foldplan.plan/v1"})");
  auto sim = ReadSimulation(path);
  REQUIRE_FALSE(sim.ok());
  CHECK(sim.status().message().find(path + ": /schema") != std::string::npos);
  CHECK(sim.status().message().find("foldplan.simulation/v1") != std::string::npos);
}

TEST_CASE("report inputs: a bad memory point names its pointer") {
  const std::string path = ReportInputsWrite("sim_points.json", R"({"schema": "foldplan.simulation/v1", "layout": "tp=1",
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
  const std::string path = ReportInputsWrite("plan_step.json", R"({"schema": "foldplan.plan/v1", "objective": "throughput",
    "inputs": {"cluster": {"name": "c"}, "model": {"name": "m"}, "job": {"name": "j"}},
    "candidates": [{"layout": {"text": "tp=1"}, "step_time_s": 1, "tokens_per_s": 1, "mfu": 0.1}]})");
  auto plan = ReadPlanSummary(path);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().message().find(path + ": /candidates/0/step") != std::string::npos);
}

// A simulation file as `simulate --json` writes it: every field, the ones
// the report does not draw (overlap, ranks, tasks) among them.
std::string ReportInputsSimulationText(int segments, int ranks) {
  nlohmann::json j;
  j["schema"] = "foldplan.simulation/v1";
  j["layout"] = "tp=2,cp=1,dp=2,pp=2,ep=4,etp=1,edp=1,world=8";
  j["fits"] = true;
  j["peak_gib"] = 41.5;
  j["hbm_gib"] = 79.6;
  j["schedule"] = "1f1b";
  j["overlap"] = {{"tp", "on"}, {"pp", "off"}};
  j["simulated"] = {{"step_time_s", 1.25}, {"bubble_fraction", 0.125}, {"tasks", 1234},
                    {"ranks", {{{"rank", 0}, {"busy_s", 1.0}, {"comm_s", {{"tp", 0.1}}}}}}};
  j["analytical"] = {{"step_time_s", 1.2}, {"bubble_fraction", 0.1}};
  nlohmann::json segs = nlohmann::json::array();
  for (int i = 0; i < segments; ++i) {
    segs.push_back({{"rank", i % 2}, {"pass", i % 3 == 0 ? "F" : i % 3 == 1 ? "B" : "W"}, {"microbatch", i / 2},
                    {"chunk", 0}, {"start_s", 0.001 * i}, {"duration_s", 0.0005 + 1e-6 * i},
                    {"by_kind_s", {{"compute", 0.0004}, {"tp", 0.0001 * (i % 5)}}}, {"tasks", {i, i + 1}}});
  }
  j["critical_path"] = {{"by_kind_s", {{"compute", 1.0}}}, {"segments", segs}};
  nlohmann::json mem = nlohmann::json::array();
  for (int r = 0; r < ranks; ++r) {
    nlohmann::json points = nlohmann::json::array();
    for (int k = 0; k < 5 + r; ++k) points.push_back({0.1 * k, 1e9 * (k + r)});
    mem.push_back({{"rank", r}, {"pipeline_rank", r % 2}, {"peak_bytes", 4e9 + r}, {"peak_at_s", 0.5},
                   {"model_peak_bytes", 4.5e9}, {"peak_inflight_microbatches", 2}, {"points", points}});
  }
  j["memory_timeline"] = mem;
  return j.dump(1);
}

TEST_CASE("report inputs: the streaming simulation reader keeps the values a full parse reads") {
  const std::string text = ReportInputsSimulationText(40, 3);
  auto sim = ParseSimulation(text, "sim.json");
  REQUIRE_MESSAGE(sim.ok(), sim.status().message());
  // The reference: the whole tree, read field by field.
  const nlohmann::json doc = nlohmann::json::parse(text);
  CHECK(sim->layout == doc["layout"].get<std::string>());
  CHECK(sim->schedule == doc["schedule"].get<std::string>());
  CHECK(sim->hbm_gib == doc["hbm_gib"].get<double>());
  CHECK(sim->simulated_step_s == doc["simulated"]["step_time_s"].get<double>());
  CHECK(sim->simulated_bubble_fraction == doc["simulated"]["bubble_fraction"].get<double>());
  CHECK(sim->analytical_step_s == doc["analytical"]["step_time_s"].get<double>());
  const nlohmann::json& segs = doc["critical_path"]["segments"];
  REQUIRE(sim->critical_path.size() == segs.size());
  CHECK(sim->critical_path_segments == segs.size());
  for (size_t i = 0; i < segs.size(); ++i) {
    CAPTURE(i);
    const SimSegment& s = sim->critical_path[i];
    CHECK(s.rank == segs[i]["rank"].get<int>());
    CHECK(s.pass == segs[i]["pass"].get<std::string>());
    CHECK(s.microbatch == segs[i]["microbatch"].get<int>());
    CHECK(s.start_s == segs[i]["start_s"].get<double>());
    CHECK(s.duration_s == segs[i]["duration_s"].get<double>());
    REQUIRE(s.by_kind_s.size() == segs[i]["by_kind_s"].size());
    for (const auto& [kind, seconds] : s.by_kind_s) CHECK(seconds == segs[i]["by_kind_s"][kind].get<double>());
  }
  const nlohmann::json& mem = doc["memory_timeline"];
  REQUIRE(sim->memory.size() == mem.size());
  for (size_t r = 0; r < mem.size(); ++r) {
    CAPTURE(r);
    const SimMemory& m = sim->memory[r];
    CHECK(m.rank == mem[r]["rank"].get<int>());
    CHECK(m.pipeline_rank == mem[r]["pipeline_rank"].get<int>());
    CHECK(m.peak_bytes == mem[r]["peak_bytes"].get<double>());
    CHECK(m.model_peak_bytes == mem[r]["model_peak_bytes"].get<double>());
    REQUIRE(m.points.size() == mem[r]["points"].size());
    for (size_t k = 0; k < m.points.size(); ++k) {
      CHECK(m.points[k].first == mem[r]["points"][k][0].get<double>());
      CHECK(m.points[k].second == mem[r]["points"][k][1].get<double>());
    }
  }
}

TEST_CASE("report inputs: the simulation reader keeps what is drawn and counts the rest") {
  const std::string text = ReportInputsSimulationText(static_cast<int>(kMaxSegments) + 7,
                                                      static_cast<int>(kMaxMemoryRanks) + 2);
  auto sim = ParseSimulation(text, "sim.json");
  REQUIRE_MESSAGE(sim.ok(), sim.status().message());
  CHECK(sim->critical_path.size() == kMaxSegments);
  CHECK(sim->critical_path_segments == kMaxSegments + 7);
  CHECK(sim->memory.size() == kMaxMemoryRanks);
  CHECK(sim->memory_ranks == kMaxMemoryRanks + 2);
}

TEST_CASE("report inputs: a file of another schema is refused at its schema, before its body is read") {
  // The body is not even JSON: a reader that parsed it first would report
  // the syntax error instead.
  const std::string rank_map = R"({"schema": "foldplan.rankmap/v1", "groups": [[0, 1], [2, )";
  auto plan = ParsePlanSummary(rank_map, "ranks.json");
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().message().find("ranks.json: /schema: expected") != std::string::npos);
  CHECK(plan.status().message().find("foldplan.plan/v1") != std::string::npos);
  auto sim = ParseSimulation(rank_map, "ranks.json");
  REQUIRE_FALSE(sim.ok());
  CHECK(sim.status().message().find("ranks.json: /schema: expected") != std::string::npos);
  CHECK(sim.status().message().find("foldplan.simulation/v1") != std::string::npos);
}

TEST_CASE("report inputs: the streaming reader keeps the parser's rules") {
  auto syntax = ParseSimulation("{\"schema\": \"foldplan.simulation/v1\",\n \"layout\": }", "s.json");
  REQUIRE_FALSE(syntax.ok());
  CHECK(syntax.status().message().find("s.json:2:") != std::string::npos);
  CHECK(syntax.status().message().find("not valid JSON: syntax error") != std::string::npos);
  auto twice = ParseSimulation(R"({"schema": "foldplan.simulation/v1", "layout": "a", "layout": "b"})", "s.json");
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.status().message().find("s.json: /layout: duplicate key") != std::string::npos);
  std::string deep = R"({"schema": "foldplan.simulation/v1", "x": )";
  for (int i = 0; i < 100; ++i) deep += "[";
  auto nested = ParseSimulation(deep, "s.json");
  REQUIRE_FALSE(nested.ok());
  CHECK(nested.status().message().find("nested deeper than") != std::string::npos);
}

TEST_CASE("report inputs: a plan's rank map is not kept, its candidates are") {
  const std::string text = R"({"schema": "foldplan.plan/v1", "objective": "throughput",
    "inputs": {"cluster": {"name": "c"}, "model": {"name": "m"}, "job": {"name": "j"}},
    "memory_limit": {"max_peak_gib": 75.5},
    "candidates": [{"layout": {"text": "tp=1"}, "step_time_s": 1, "tokens_per_s": 1234567, "mfu": 0.1,
      "step": {"microbatches": 4, "stage_compute_s": 0.1, "stage_exposed_comm_s": 0, "stage_time_s": 0.1,
               "pipeline_s": 0.5, "bubble_s": 0.1, "dp_exposed_s": 0.2, "optimizer_s": 0.3},
      "memory": {"peak_gib": 40, "hbm_gib": 80, "fits": true, "worst_stage": 0, "terms": {}},
      "comm": {}, "equivalent_layouts": 3}],
    "rank_map": {"schema": "foldplan.rankmap/v1", "groups": {"tp": [[0]]}}})";
  auto plan = ParsePlanSummary(text, "plan.json");
  REQUIRE_MESSAGE(plan.ok(), plan.status().message());
  CHECK(plan->memory_limit_gib == 75.5);
  REQUIRE(plan->candidates.size() == 1);
  CHECK(plan->candidates[0].tokens_per_s == 1234567);
  CHECK(plan->candidates[0].equivalent_layouts == 3);
}

}  // namespace
}  // namespace foldplan
