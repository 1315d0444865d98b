// foldbench's input reader (validate/plan_input.h): the fixture plan's
// groups and shapes, errors that name the file and JSON pointer, the checks
// of groups against degrees (a plan whose ep degree disagreed with its ep
// groups overran the dispatcher's buffers), the group kinds each op needs,
// the world-size refusal, the reader's text entry point on damaged input,
// and the report helpers that need no MPI.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "core/atomic_file.h"
#include "core/json_check.h"
#include "validate/op.h"
#include "validate/plan_input.h"
#include "validate/report.h"

using namespace foldplan;
using namespace foldplan::validate;
using nlohmann::json;

namespace {

const std::string kPlan = std::string(FOLDPLAN_TEST_DATA_DIR) + "/validate/pp2_cp2_ep4.plan.json";
// TP2 x CP2, EP2 x ETP2, PP2 on 8 ranks.
const std::string kEtpPlan =
    std::string(FOLDPLAN_TEST_DATA_DIR) + "/validate/tp2_cp2_ep2_etp2.plan.json";

json FixturePlan(const std::string& path = kPlan) {
  auto doc = ParseJsonFile(path);
  REQUIRE(doc.ok());
  return doc.value();
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
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
    CHECK(Has(ErrorOf(doc), "x.json: /rank_map/groups/cp: 4 groups of 2 ranks, but "
                            "/rank_map/degrees/cp = 4 asks for 2 groups of 4 ranks"));
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

TEST_CASE("an ep degree that disagrees with the ep groups is refused") {
  // ep 2 in the degrees, groups of 4: the dispatcher sized its count
  // buffer for 2 peers and received from 4 (heap overflow on every rank).
  json doc = FixturePlan();
  doc["rank_map"]["degrees"]["ep"] = 2;
  const std::string error = ErrorOf(doc);
  CHECK(Has(error, "x.json: /rank_map/groups/ep: 2 groups of 4 ranks, but "
                   "/rank_map/degrees/ep = 2 asks for 4 groups of 2 ranks"));
  CHECK(Has(error, "x.json: /rank_map/degrees: etp x ep x edp x pp = 1 x 2 x 1 x 2 = 4, but "
                   "/rank_map/world_size is 8"));
}

TEST_CASE("a tp degree that disagrees with the tp groups is refused") {
  json doc = FixturePlan(kEtpPlan);
  doc["rank_map"]["degrees"]["tp"] = 1;
  const std::string error = ErrorOf(doc);
  CHECK(Has(error, "x.json: /rank_map/groups/tp: 4 groups of 2 ranks, but "
                   "/rank_map/degrees/tp = 1 asks for 8 groups of 1 rank"));
  // The kinds made of tp and other degrees are checked too.
  CHECK(Has(error, "x.json: /rank_map/groups/tp_cp: 2 groups of 4 ranks, but "
                   "/rank_map/degrees tp x cp = 1 x 2 = 2 asks for 4 groups of 2 ranks"));
}

TEST_CASE("groups of the right partition but the wrong size for their degree are refused") {
  // Degrees agree with the world; the ep groups are a partition, of 2.
  json doc = FixturePlan();
  doc["rank_map"]["groups"]["ep"] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  CHECK(ErrorOf(doc) == "x.json: /rank_map/groups/ep: 4 groups of 2 ranks, but "
                        "/rank_map/degrees/ep = 4 asks for 2 groups of 4 ranks");
}

TEST_CASE("a product kind's groups are checked against the product of its degrees") {
  json doc = FixturePlan();
  doc["rank_map"]["groups"]["dp_cp"] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  CHECK(ErrorOf(doc) == "x.json: /rank_map/groups/dp_cp: 4 groups of 2 ranks, but "
                        "/rank_map/degrees dp x cp = 2 x 2 = 4 asks for 2 groups of 4 ranks");
}

TEST_CASE("a degree that does not divide the world is refused") {
  json doc = FixturePlan();
  doc["rank_map"]["degrees"]["ep"] = 3;
  CHECK(Has(ErrorOf(doc), "x.json: /rank_map/groups/ep: 2 groups of 4 ranks, but "
                          "/rank_map/degrees/ep = 3 does not divide the world of 8 ranks"));
}

TEST_CASE("degrees whose products are not the world are refused") {
  json doc = FixturePlan();
  doc["rank_map"]["degrees"]["dp"] = 4;
  CHECK(Has(ErrorOf(doc), "x.json: /rank_map/degrees: tp x cp x dp x pp = 1 x 2 x 4 x 2 = 16, "
                          "but /rank_map/world_size is 8"));
}

TEST_CASE("each kind's groups must hold every rank exactly once") {
  json doc = FixturePlan();
  SUBCASE("a rank in no group") {
    doc["rank_map"]["groups"]["cp"] = {{0, 1}, {2, 3}, {4, 5}, {6}};
    CHECK(Has(ErrorOf(doc), "x.json: /rank_map/groups/cp: rank 7 is in no cp group"));
  }
  SUBCASE("a rank twice in one group") {
    doc["rank_map"]["groups"]["cp"] = {{0, 0}, {2, 3}, {4, 5}, {6, 7}};
    CHECK(Has(ErrorOf(doc), "x.json: /rank_map/groups/cp/0/1: rank 0 is listed twice in this "
                            "cp group"));
  }
  SUBCASE("a rank in two groups") {
    doc["rank_map"]["groups"]["ep"] = {{0, 1, 2, 3}, {3, 5, 6, 7}};
    CHECK(Has(ErrorOf(doc), "x.json: /rank_map/groups/ep/1/0: rank 3 is in more than one ep "
                            "group"));
  }
  SUBCASE("groups of unequal size") {
    doc["rank_map"]["groups"]["dp"] = {{0, 2}, {1, 3}, {4, 5, 6, 7}};
    CHECK(Has(ErrorOf(doc), "x.json: /rank_map/groups/dp: groups of unequal size (2 and 4)"));
  }
  SUBCASE("embedding groups need not partition the world") {
    doc["rank_map"]["groups"]["embedding"] = {{0, 4}, {0, 5}};
    CHECK(ParseBenchInput(doc, "x.json").ok());
  }
}

TEST_CASE("experts that do not divide over ep are refused") {
  json doc = FixturePlan();
  doc["inputs"]["model"]["spec"]["moe"]["experts"] = 6;
  CHECK(ErrorOf(doc) == "x.json: /inputs/model/spec/moe/experts: is 6, which does not divide "
                        "over /rank_map/degrees/ep = 4");
}

TEST_CASE("a rank map file's errors point into the file itself") {
  json map = FixturePlan()["rank_map"];
  map["degrees"]["ep"] = 2;
  CHECK(Has(ErrorOf(map), "x.json: /groups/ep: 2 groups of 4 ranks, but /degrees/ep = 2 asks "
                          "for 4 groups of 2 ranks"));
}

TEST_CASE("a group kind an op needs must be in the plan; one no op needs may be missing") {
  json doc = FixturePlan();
  doc["rank_map"]["groups"].erase("ep");
  doc["rank_map"]["groups"].erase("cp");
  auto input = ParseBenchInput(doc, "x.json");
  REQUIRE(input.ok());
  const Status dispatch = CheckGroupsForOps(input.value(), {"dispatch"});
  REQUIRE_FALSE(dispatch.ok());
  CHECK(dispatch.message() == "x.json: /rank_map/groups/ep: missing; op dispatch needs the ep "
                              "groups");
  const Status both = CheckGroupsForOps(input.value(), {"ulysses", "dispatch"});
  REQUIRE_FALSE(both.ok());
  CHECK(Has(both.message(), "x.json: /rank_map/groups/cp: missing; op ulysses needs the cp groups"));
  CHECK(Has(both.message(), "x.json: /rank_map/groups/ep: missing; op dispatch needs"));
  CHECK_FALSE(CheckGroupsForOps(input.value(), {"pack"}).ok());
  CHECK_FALSE(CheckGroupsForOps(input.value(), {"sweep"}).ok());
  CHECK(CheckGroupsForOps(input.value(), {"compute"}).ok());

  json no_etp = FixturePlan();
  no_etp["rank_map"]["groups"].erase("etp");
  auto without_etp = ParseBenchInput(no_etp, "x.json");
  REQUIRE(without_etp.ok());
  CHECK(CheckGroupsForOps(without_etp.value(), {"ulysses", "pack"}).ok());
  CHECK_FALSE(CheckGroupsForOps(without_etp.value(), {"dispatch"}).ok());

  // A rank map file: the pointer is the file's own.
  json map = FixturePlan()["rank_map"];
  map["groups"].erase("cp");
  auto from_map = ParseBenchInput(map, "map.json");
  REQUIRE(from_map.ok());
  CHECK(CheckGroupsForOps(from_map.value(), {"ulysses"}).message() ==
        "map.json: /groups/cp: missing; op ulysses needs the cp groups");
}

TEST_CASE("ReadPlanText reads a plan's text and names the file in errors") {
  auto text = ReadTextFile(kPlan);
  REQUIRE(text.ok());
  auto input = ReadPlanText(text.value(), "given.json");
  REQUIRE(input.ok());
  CHECK(input->file == "given.json");
  CHECK(input->groups.at("ep") == GroupList{{0, 1, 2, 3}, {4, 5, 6, 7}});

  auto broken = ReadPlanText("{\"schema\": ", "given.json");
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.status().message().find("given.json:1:") == 0);
  for (const char* odd : {"", "null", "[]", "7", "\"x\"", "{}", "{\"schema\": 1}",
                          "{\"schema\": \"foldplan.rankmap/v1\"}",
                          "{\"schema\": \"foldplan.plan/v1\", \"candidates\": [1]}"}) {
    CAPTURE(odd);
    CHECK_FALSE(ReadPlanText(odd, "odd.json").ok());
  }
}

TEST_CASE("a plan damaged anywhere is read or refused, never a crash") {
  // Every value of both fixtures replaced in turn by each of these; the
  // reader must answer with a value or an error, and never through its
  // last-resort catch (an exception is a reader bug).
  const std::vector<json> odd_values = {
      nullptr, true, -1, 0, 1, 3, 9, int64_t{1} << 40, 1e300, -0.5, "x", json::array(),
      json::object(), json::array({json::array()}), json::array({-1}), json::array({0, 0})};
  for (const std::string& path : {kPlan, kEtpPlan}) {
    const json doc = FixturePlan(path);
    const json flat = doc.flatten();
    int refused = 0;
    for (const auto& [pointer, unused] : flat.items()) {
      for (const json& odd : odd_values) {
        json damaged = doc;
        damaged[json::json_pointer(pointer)] = odd;
        auto input = ParseBenchInput(damaged, "x.json");
        if (!input.ok()) {
          ++refused;
          if (Has(input.status().message(), "cannot read the plan")) {
            FAIL_CHECK(pointer << " = " << odd.dump() << ": " << input.status().message());
          }
        }
      }
    }
    CHECK(refused > 0);
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

// The crash foldbench had (a stack overflow quoting a deep value in an
// error) cannot happen: nesting is refused while parsing, by pointer.
TEST_CASE("a plan nested a million levels deep is refused by pointer, not a crash") {
  const std::string text = "{\"schema\": \"foldplan.plan/v1\", \"rank_map\": " + std::string(1000000, '[') +
                           std::string(1000000, ']') + "}";
  auto deep = ReadPlanText(text, "deep.json");
  REQUIRE(!deep.ok());
  CHECK(deep.status().message().rfind("deep.json: /rank_map/0/0/", 0) == 0);
  CHECK(deep.status().message().find("nested deeper than 64 levels") != std::string::npos);
}

// Groups of the right sizes that the layout's degrees and order do not
// generate (doc/folding.md) ran to "0 wrong" before: each is refused at the
// pointer of the first wrong group.
TEST_CASE("cp groups equal to the dp groups are refused by pointer") {
  json doc = FixturePlan();
  doc["rank_map"]["groups"]["cp"] = doc["rank_map"]["groups"]["dp"];
  const std::string error = ErrorOf(doc);
  CHECK(Has(error, "x.json: /rank_map/groups/cp/0: ranks 0 and 2 are in different dp coordinates "
                   "(0 and 1), which a cp group never spans; order \"tp-cp-ep-dp-pp\" makes "
                   "rank 0's cp group [0, 1]"));
}

TEST_CASE("ep groups spanning pipeline stages are refused by pointer") {
  json doc = FixturePlan();
  doc["rank_map"]["groups"]["ep"] = json::parse("[[0, 1, 4, 5], [2, 3, 6, 7]]");
  const std::string error = ErrorOf(doc);
  CHECK(Has(error, "x.json: /rank_map/groups/ep/0: ranks 0 and 4 are in different pipeline "
                   "stages (0 and 1), which a ep group never spans (only pp groups cross "
                   "stages); order \"tp-cp-ep-dp-pp\" makes rank 0's ep group [0, 1, 2, 3]"));
}

TEST_CASE("pp groups equal to the cp groups are refused by pointer") {
  json doc = FixturePlan();
  doc["rank_map"]["groups"]["pp"] = doc["rank_map"]["groups"]["cp"];
  doc["rank_map"]["groups"]["mp"] = doc["rank_map"]["groups"]["cp"];
  const std::string error = ErrorOf(doc);
  CHECK(Has(error, "x.json: /rank_map/groups/pp/0: ranks 0 and 1 are in different cp coordinates "
                   "(0 and 1), which a pp group never spans; order \"tp-cp-ep-dp-pp\" makes "
                   "rank 0's pp group [0, 4]"));
  CHECK(Has(error, "x.json: /rank_map/groups/mp/0: ranks 0 and 1 are in different cp"));
}

TEST_CASE("a layout that disagrees with its rank map is refused by pointer") {
  json doc = FixturePlan();
  doc["rank_map"]["order"] = "tp-cp-ep-pp-dp";
  CHECK(Has(ErrorOf(doc), "x.json: /rank_map/layout: says order=tp-cp-ep-dp-pp but "
                          "/rank_map/order is tp-cp-ep-pp-dp"));
  doc = FixturePlan();
  doc["candidates"][0]["layout"]["cp"] = 1;
  doc["candidates"][0]["layout"]["dp"] = 4;
  CHECK(Has(ErrorOf(doc), "x.json: /candidates/0/layout/cp: is 1 but /rank_map/degrees/cp is 2"));
  doc = FixturePlan();
  doc["rank_map"]["layout"] = "tp=1,cp=2,dp=2,pp=2,ep=4,etp=1,edp=1,vpp=1,mbs=1,world=16";
  CHECK(Has(ErrorOf(doc), "x.json: /rank_map/layout: says world=16 but /rank_map/world_size is 8"));
}

TEST_CASE("groups numbered by another order than the rank map's are refused") {
  // Layout text, order and candidate all say tp-dp-cp-ep-pp; the groups are
  // those of tp-cp-ep-dp-pp. That order's cp groups are [0, 2], ...
  json doc = FixturePlan();
  doc["rank_map"]["order"] = "tp-dp-cp-ep-pp";
  std::string layout = doc["rank_map"]["layout"];
  layout.replace(layout.find("order=tp-cp-ep-dp-pp"), 20, "order=tp-dp-cp-ep-pp");
  doc["rank_map"]["layout"] = layout;
  doc["candidates"][0]["layout"]["order"] = "tp-dp-cp-ep-pp";
  const std::string error = ErrorOf(doc);
  CHECK(Has(error, "x.json: /rank_map/groups/cp/0: ranks 0 and 1 are in different dp "
                   "coordinates (0 and 1), which a cp group never spans; order "
                   "\"tp-dp-cp-ep-pp\" makes rank 0's cp group [0, 2]"));
  CHECK(Has(error, "x.json: /rank_map/groups/dp/0: ranks 0 and 2 are in different cp"));
}

TEST_CASE("an order under which the views disagree on a rank's stage is refused") {
  // tp-cp-ep-pp-dp with tp x cp = 2 but etp x ep = 4: the dense view puts
  // rank 2 in stage 1, the expert view in stage 0.
  json doc = FixturePlan();
  doc["rank_map"]["order"] = "tp-cp-ep-pp-dp";
  doc["rank_map"]["layout"] = "tp=1,cp=2,dp=2,pp=2,ep=4,etp=1,edp=1,vpp=1,mbs=1,world=8";
  doc["candidates"][0]["layout"].erase("order");
  CHECK(Has(ErrorOf(doc), "x.json: /rank_map/order: \"tp-cp-ep-pp-dp\" puts rank 2 in stage 1 "
                          "of the dense view (tp x cp x dp) but stage 0 of the expert view (etp "
                          "x ep x edp); each view must factor every stage"));
}

TEST_CASE("an order that cannot number the rank map is refused by pointer") {
  json doc = FixturePlan();
  doc["rank_map"]["order"] = "tp-ep-dp-pp";  // leaves out cp, of degree 2
  doc["rank_map"]["layout"] = "tp=1,cp=2,dp=2,pp=2,ep=4,etp=1,edp=1,vpp=1,mbs=1,world=8";
  doc["candidates"][0]["layout"].erase("order");
  CHECK(Has(ErrorOf(doc), "x.json: /rank_map/order: \"tp-ep-dp-pp\" leaves out cp, whose degree "
                          "cp is 2"));
  doc["rank_map"]["order"] = "tp-cp-xx-dp-pp";
  CHECK(Has(ErrorOf(doc), "x.json: /rank_map/order: expected an order of tp, cp, ep, dp and pp "
                          "joined by '-' (tp-cp-ep-dp-pp), found the string \"tp-cp-xx-dp-pp\""));
}

TEST_CASE("the edited fixture plans are refused at their first wrong group") {
  const std::string dir = std::string(FOLDPLAN_TEST_DATA_DIR) + "/validate/";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"cp_groups_are_dp", "/rank_map/groups/cp/0: ranks 0 and 2"},
      {"ep_across_stages", "/rank_map/groups/ep/0: ranks 0 and 4 are in different pipeline stages"},
      {"pp_groups_are_cp", "/rank_map/groups/pp/0: ranks 0 and 1"},
      {"layout_order_disagrees", "/rank_map/groups/cp/0: ranks 0 and 1 are in different dp"},
  };
  for (const auto& c : cases) {
    const std::string& name = c.first;  // not a structured binding: CAPTURE's lambda takes it
    const std::string& part = c.second;
    CAPTURE(name);
    auto input = ReadBenchInput(dir + name + ".plan.json");
    REQUIRE_FALSE(input.ok());
    CHECK(Has(input.status().message(), dir + name + ".plan.json: " + part));
  }
}

TEST_CASE("plans and rank maps the planner wrote pass the generation check") {
  for (const std::string& path :
       {kPlan, kEtpPlan, std::string(FOLDPLAN_TEST_DATA_DIR) + "/../golden/ranks_w16_rankmap.json"}) {
    CAPTURE(path);
    auto input = ReadBenchInput(path);
    CHECK(input.ok());
    if (input.ok()) CHECK(input->order == "tp-cp-ep-dp-pp");
  }
  // `foldplan ranks --world-size 16 --layout ...,order=O` for other orders.
  const std::string dir = std::string(FOLDPLAN_TEST_DATA_DIR) + "/validate/rankmap_w16_";
  for (const std::string order : {"tp-cp-ep-pp-dp", "ep-tp-dp-pp-cp", "cp-tp-ep-dp-pp"}) {
    CAPTURE(order);
    std::string name = order;
    std::replace(name.begin(), name.end(), '-', '_');
    auto input = ReadBenchInput(dir + name + ".json");
    CHECK(input.ok());
    if (input.ok()) CHECK(input->order == order);
  }
}
