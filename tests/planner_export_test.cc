// Rank-map exports: the foldplan.rankmap/v1 JSON round trip, torch and
// JAX, and each refusal's reason (Megatron's:
// tests/planner_export_megatron_test.cc; OLMo-core's and MaxText's:
// tests/planner_export_olmo_core_test.cc, tests/planner_export_maxtext_test.cc;
// torchtitan's: tests/planner_export_torchtitan_test.cc). (tests/export_parse_check.py
// parses the trainer formats.)
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "export_fixtures.h"
#include "fixtures.h"
#include "planner/rank_export.h"
#include "planner/rank_map.h"
#include "text_count.h"

namespace foldplan {
namespace {

using testing::Contains;
using testing::MakeLayout;
using testing::BuildMap;
using testing::ExportRefusal;
using testing::ExportText;
ClusterSpec Dgx(int nodes) { return testing::MakeCluster(nodes); }

ModelSpec Moe(int layers, int experts) {
  ModelSpec m;
  m.name = "test-moe";
  m.layers = layers;
  m.heads = 16;
  m.kv_heads = 8;
  m.hidden = 1024;
  m.moe = MoeSpec{};
  m.moe->experts = experts;
  m.moe->top_k = 2;
  m.moe->ffn_hidden = 512;
  return m;
}

TEST_CASE("export: format names") {
  for (int i = 0; i < kExportFormatCount; ++i) {
    const auto f = static_cast<ExportFormat>(i);
    Result<ExportFormat> parsed = ParseExportFormat(Name(f));
    REQUIRE(parsed.ok());
    CHECK(*parsed == f);
  }
  Result<ExportFormat> bad = ParseExportFormat("deepspeed");
  REQUIRE_FALSE(bad.ok());
  CHECK(Contains(bad.status().message(), "rankmap, megatron, torch, torchtitan, olmo-core, jax, maxtext"));
}

TEST_CASE("export rankmap: valid JSON that round-trips every group") {
  Layout l = MakeLayout(16, 2, 2, 2, 4, 1);
  l.stage_layers = {4, 4};
  const RankMap m = BuildMap(l, 4);
  const ClusterSpec cluster = Dgx(4);
  const ModelSpec model = Moe(8, 8);
  JobSpec job;
  const std::string text = ExportText(m, ExportFormat::kRankMap, {&cluster, &model, &job});
  const nlohmann::json j = nlohmann::json::parse(text);
  CHECK(j["schema"] == "foldplan.rankmap/v1");
  CHECK(j["world_size"] == 16);
  CHECK(j["degrees"]["edp"] == 2);
  CHECK(j["order"] == "tp-cp-ep-dp-pp");
  CHECK(j["stage_layers"] == nlohmann::json::array({4, 4}));
  CHECK(j["views"]["dense"]["dims"] == nlohmann::json::array({"pp", "dp", "cp", "tp"}));
  CHECK(j["views"]["expert"]["shape"] == nlohmann::json::array({2, 2, 4, 1}));
  CHECK(j["views"]["dense"]["ranks"].get<std::vector<int>>() == m.dense_view());
  CHECK(j["views"]["expert"]["ranks"].get<std::vector<int>>() == m.expert_view());
  REQUIRE(j["groups"].size() == static_cast<size_t>(kGroupKindCount));
  for (int i = 0; i < kGroupKindCount; ++i) {
    const auto kind = static_cast<GroupKind>(i);
    CHECK(j["groups"][Name(kind)].get<Groups>() == m.groups(kind));
  }
  // Group kinds appear in GroupKind order in the text.
  CHECK(text.find("\"tp\": [[0, 1]") == std::string::npos);  // one group per line, not all on one
  const size_t groups_at = text.find("\"groups\": {");
  CHECK(text.find("\"dp_cp\": [", groups_at) < text.find("\"edp\": [", groups_at));
  CHECK(Contains(text, "      [0, 2, 4, 6],\n"));
  CHECK(j["roles"]["loss_and_dense_grads"] == "dp_cp");
  CHECK(j["placement"]["kind"] == "linear");
  CHECK(j["placement"]["gpu"].size() == 16);
  CHECK(j["placement"]["rail"][9] == 1);
  CHECK(j["idle_gpus"] == 16);
  CHECK(j["straddles"].empty());
  CHECK(j["expert_owner"]["local_experts"] == 2);
  CHECK(j["expert_owner"]["first_expert"][5] == 2);  // rank 5 has ep coordinate 1
  CHECK(j["invariants"].size() == RankMapInvariants().size());
  CHECK(j["coords"]["edp"][4] == 1);
}

TEST_CASE("export rankmap: experts not divisible by ep is an error") {
  const RankMap m = BuildMap(MakeLayout(16, 2, 2, 2, 4, 1));
  const ModelSpec model = Moe(8, 6);
  CHECK(Contains(ExportRefusal(m, ExportFormat::kRankMap, {nullptr, &model, nullptr}),
                 "6 experts, not divisible by ep 4"));
}

TEST_CASE("export torch: DeviceMeshes from the real rank arrays") {
  const RankMap m = BuildMap(MakeLayout(16, 2, 2, 2, 4, 1, kPpDpOrder));
  const std::string py = ExportText(m, ExportFormat::kTorch);
  CHECK(Contains(py, "from torch.distributed.device_mesh import DeviceMesh"));
  CHECK(Contains(py, "init_process_group"));
  // Dense view of the tp-pp-dp order: (p, d, c, t) -> t + 2c + 4p + 8d.
  CHECK(Contains(py,
                 "dense_ranks = torch.tensor([0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, "
                 "15]).reshape(2, 2, 2, 2)"));
  CHECK(Contains(py, "mesh_dim_names=(\"pp\", \"edp\", \"ep\", \"etp\")"));
  CHECK(Contains(py, "dense_mesh[\"dp\", \"cp\"]._flatten(\"dp_cp\")"));
  CHECK(Contains(py, "new_subgroups_by_enumeration(\n    [[0, 4],\n    [1, 5]"));
}

TEST_CASE("export jax: one mesh whose axes are both views' rank digits") {
  SUBCASE("tp2 cp2 pp2 | ep4 etp1: ep is the product of the tp and cp digits") {
    // Dense digits (fastest first) tp 2, cp 2, dp 2, pp 2; expert etp 1, ep 4,
    // edp 2, pp 2: cuts at strides 1, 2, 4, 8, 16 give four axes of 2 and
    // ep = tp_ep x cp_ep. Two 8-GPU domains: pp across (DCN), the rest inside.
    const std::string py = ExportText(BuildMap(MakeLayout(16, 2, 2, 2, 4, 1)), ExportFormat::kJax);
    CHECK(Contains(py, "axis_names = (\"pp\", \"dp_edp\", \"cp_ep\", \"tp_ep\")\n"));
    CHECK(Contains(py, "mesh_shape = (2, 2, 2, 2)\n"));
    CHECK(Contains(py, "ici_shape = (1, 2, 2, 2)\ndcn_shape = (2, 1, 1, 1)\n"));
    CHECK(Contains(py, "EP = (\"cp_ep\", \"tp_ep\")\n"));
    CHECK(Contains(py, "TP = \"tp_ep\"\n"));
    CHECK(Contains(py, "expert_w_in = P(EP, None, ETP)"));
  }
  SUBCASE("digits that do not nest are refused") {
    // tp 2 ends at stride 2, ep 3 ends (edp starts) at stride 3: ep is no product of mesh axes.
    Result<RankMap> m = BuildRankMap(MakeLayout(12, 2, 1, 1, 3, 1), testing::MakeCluster(2));
    REQUIRE(m.ok());
    const std::string why = ExportRefusal(m.value(), ExportFormat::kJax);
    CHECK(Contains(why, "jax cannot express this layout"));
    CHECK(Contains(why, "tp's digit boundary at rank stride 2 and edp's at stride 3 do not nest"));
  }
}

// A layout of 16 ranks, pp 2 (no CP, tp 1), under `schedule` with the vpp
// it needs.
Layout Scheduled(PipelineSchedule schedule) {
  Layout l = MakeLayout(16, 1, 1, 2, 4, 1);
  l.vpp = schedule == PipelineSchedule::kInterleaved1F1B || schedule == PipelineSchedule::kDualPipeV ? 2 : 1;
  l.schedule = schedule;
  l.stage_layers.assign(static_cast<size_t>(l.pp * l.vpp), 2);
  return l;
}

TEST_CASE("export rankmap carries a schedule only when the layout names one other than its implied one") {
  CHECK_FALSE(nlohmann::json::parse(ExportText(BuildMap(MakeLayout(16, 1, 1, 2, 4, 1)), ExportFormat::kRankMap))
                  .contains("schedule"));
  CHECK_FALSE(nlohmann::json::parse(ExportText(BuildMap(Scheduled(PipelineSchedule::k1F1B)), ExportFormat::kRankMap))
                  .contains("schedule"));
  const nlohmann::json j =
      nlohmann::json::parse(ExportText(BuildMap(Scheduled(PipelineSchedule::kDualPipeV)), ExportFormat::kRankMap));
  CHECK(j["schedule"] == "dualpipev");
  CHECK(Contains(j["layout"].get<std::string>(), ",schedule=dualpipev,"));
}

}  // namespace
}  // namespace foldplan
