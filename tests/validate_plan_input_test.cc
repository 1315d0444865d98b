// foldbench's input reader (validate/plan_input.h): the fixture plan's
// groups and shapes, errors that name the file and JSON pointer, the
// world-size refusal, and the report helpers that need no MPI.
#include <doctest/doctest.h>

#include <string>

#include "core/json_check.h"
#include "validate/plan_input.h"
#include "validate/report.h"

using namespace foldplan;
using namespace foldplan::validate;
using nlohmann::json;

namespace {

const std::string kPlan = std::string(FOLDPLAN_TEST_DATA_DIR) + "/validate/pp2_cp2_ep4.plan.json";

json FixturePlan() {
  auto doc = ParseJsonFile(kPlan);
  REQUIRE(doc.ok());
  return doc.value();
}

std::string ErrorOf(const json& doc) {
  auto input = ParseBenchInput(doc, "x.json");
  REQUIRE_FALSE(input.ok());
  return input.status().message();
}

}  // namespace

TEST_CASE("the fixture plan: PP2, DP2 x CP2, EP4 on 8 ranks") {
  auto input = ReadBenchInput(kPlan);
  REQUIRE(input.ok());
  CHECK(input->schema == "foldplan.plan/v1");
  CHECK(input->world_size == 8);
  CHECK(input->degrees.at("cp") == 2);
  CHECK(input->degrees.at("pp") == 2);
  CHECK(input->degrees.at("ep") == 4);
  CHECK(input->groups.at("cp") == GroupList{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(input->groups.at("ep") == GroupList{{0, 1, 2, 3}, {4, 5, 6, 7}});
  REQUIRE(input->has_shapes);
  CHECK(input->shapes.seq_len == 4096);
  CHECK(input->shapes.mbs == 1);
  CHECK(input->shapes.heads == 32);
  CHECK(input->shapes.kv_heads == 8);
  CHECK(input->shapes.head_dim == 128);
  CHECK(input->shapes.hidden == 4096);
  // Mixtral 8x7B's experts, for the dispatcher.
  CHECK(input->shapes.experts == 8);
  CHECK(input->shapes.top_k == 2);
  CHECK(input->shapes.moe_ffn_hidden == 14336);
  CHECK(input->layout_text.find("cp=2") != std::string::npos);
}

TEST_CASE("a rank map file gives groups but no shapes") {
  auto input = ParseBenchInput(FixturePlan()["rank_map"], "map.json");
  REQUIRE(input.ok());
  CHECK(input->schema == "foldplan.rankmap/v1");
  CHECK(input->world_size == 8);
  CHECK(input->groups.at("cp").size() == 4);
  CHECK_FALSE(input->has_shapes);
}

TEST_CASE("errors name the file and the JSON pointer") {
  SUBCASE("another schema") {
    json doc = {{"schema", "foldplan.enumeration/v1"}};
    CHECK(ErrorOf(doc).find("x.json: /schema: expected \"foldplan.plan/v1\"") == 0);
  }
  SUBCASE("a missing model field") {
    json doc = FixturePlan();
    doc["inputs"]["model"]["spec"].erase("heads");
    CHECK(ErrorOf(doc).find("x.json: /inputs/model/spec/heads: missing") != std::string::npos);
  }
  SUBCASE("more experts per token than experts") {
    json doc = FixturePlan();
    doc["inputs"]["model"]["spec"]["moe"]["top_k"] = 9;
    CHECK(ErrorOf(doc).find("x.json: /inputs/model/spec/moe/top_k: is 9, more than the 8 "
                            "experts") != std::string::npos);
  }
  SUBCASE("a rank outside the world") {
    json doc = FixturePlan();
    doc["rank_map"]["groups"]["cp"][1][0] = 9;
    CHECK(ErrorOf(doc).find("x.json: /rank_map/groups/cp/1/0: expected a rank in [0, 7], "
                            "found 9") != std::string::npos);
  }
  SUBCASE("a rank in two groups of a kind") {
    json doc = FixturePlan();
    doc["rank_map"]["groups"]["cp"][1][0] = 0;
    CHECK(ErrorOf(doc).find("/rank_map/groups/cp/1/0: rank 0 is in more than one cp group") !=
          std::string::npos);
  }
  SUBCASE("cp groups that disagree with the degrees") {
    json doc = FixturePlan();
    doc["rank_map"]["degrees"]["cp"] = 4;
    CHECK(ErrorOf(doc).find("/rank_map/groups/cp: groups of 2 ranks, but /degrees/cp is 4") !=
          std::string::npos);
  }
  SUBCASE("a plan without a rank map says why") {
    json doc = FixturePlan();
    doc["rank_map"] = nullptr;
    doc["rank_map_error"] = "illegal layout";
    CHECK(ErrorOf(doc).find("x.json: /rank_map: expected the first candidate's rank map; the "
                            "plan says: illegal layout") == 0);
  }
  SUBCASE("no candidates") {
    json doc = FixturePlan();
    doc["candidates"] = json::array();
    CHECK(ErrorOf(doc).find("x.json: /candidates: expected a non-empty array") == 0);
  }
  SUBCASE("a file that is not there") {
    auto input = ReadBenchInput("/nonexistent/plan.json");
    REQUIRE_FALSE(input.ok());
    CHECK(input.status().message().find("/nonexistent/plan.json") != std::string::npos);
  }
}

TEST_CASE("a world size other than the plan's is refused") {
  auto input = ReadBenchInput(kPlan);
  REQUIRE(input.ok());
  CHECK(CheckWorldSize(input.value(), 8).ok());
  const Status wrong = CheckWorldSize(input.value(), 4);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.message() == kPlan + ": the plan is for 8 ranks but MPI started 4; run with -np 8");
}

TEST_CASE("report helpers") {
  CHECK(Median({3, 1, 2}) == 2);
  CHECK(Median({4, 1, 2, 3}) == 2.5);

  const GroupPlacement placement =
      PlaceGroups({{0, 1}, {2, 3}}, {"a", "a", "a", "b"});
  CHECK(placement.max_hosts_per_group == 2);
  CHECK(placement.ranks_per_host == std::vector<std::vector<int>>{{2}, {1, 1}});

  auto input = ReadBenchInput(kPlan);
  REQUIRE(input.ok());
  CaseResult row;
  row.op_case.name = "q seq->heads";
  row.op_case.send_bytes_per_rank = 1000;
  row.wrong_elements = 3;
  const OpResult ran{.op = "ulysses", .group_kind = "cp", .group_size = 2, .group_count = 4,
                     .skip_reason = "", .notes = {}, .cases = {row}};
  Environment env{{"h", "h", "h", "h", "h", "h", "h", "h"}, "Open MPI", "mpi", "emulated", {}};
  const auto doc = MeasurementsJson(env, input.value(), {ran});
  CHECK(doc["schema"] == "foldplan.measurements/v1");
  CHECK(doc["environment"]["backend"] == "mpi");
  CHECK(doc["ops"][0]["placement"]["ranks_per_node"][0][0] == 2);
  CHECK(doc["ops"][0]["sizes"][0]["wrong_elements"] == 3);
  CHECK(doc["wrong_elements"] == 3);
  CHECK(ReportTable(env, input.value(), {ran}).find("correctness: FAILED, 3 wrong") !=
        std::string::npos);
}
