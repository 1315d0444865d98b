// The olmo-core export (planner/export_olmo_core.cc): OLMo-core's
// parallelism configs for a layout. Facts read in OLMo-core's sources at
// fa6c5014 (doc/trainers.md "olmo-core"): EP only on HSDP with shard degree
// ep, never with TP; the world mesh pp, dp_replicate, dp_shard, cp, tp. What
// OLMo-core cannot run is refused by the trainer rules (TrainerRefusal),
// whose message the export returns unchanged; the export's own group check
// never fires after them. tests/trainer_exports/olmo_core.py checks the same
// export from Python.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "export_fixtures.h"
#include "fixtures.h"
#include "planner/legality.h"
#include "planner/rank_export.h"
#include "planner/rank_map.h"
#include "planner/trainer_rules.h"
#include "shipped_model.h"
#include "text_count.h"

namespace foldplan {
namespace {

using testing::Contains;
using testing::MakeLayout;
using testing::BuildMap;

std::string OlmoExport(const RankMap& m, const ModelSpec* model = nullptr) {
  Result<std::string> out = ExportRankMap(m, ExportFormat::kOlmoCore, {nullptr, model, nullptr});
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  return *out;
}

// The export's refusal of `l`: the trainer rules' message, naming `rule`.
std::string OlmoRefusal(const Layout& l, const ModelSpec* model, const char* rule) {
  Result<std::string> out = ExportRankMap(BuildMap(l), ExportFormat::kOlmoCore, {nullptr, model, nullptr});
  REQUIRE_FALSE(out.ok());
  const std::string why = out.status().message();
  const Status rules = TrainerRefusal(Trainer::kOlmoCore, l, TrainerContext{nullptr, model, nullptr});
  REQUIRE_FALSE(rules.ok());
  CHECK(why == rules.message());
  CHECK(Contains(why, "olmo-core cannot run this layout"));
  CHECK(Contains(why, std::string(rule) + ": "));
  return why;
}

// A layout of 16 ranks, pp 2, tp 1, ep 4 with FSDP, that OLMo-core runs as
// HSDP, under `schedule` with the vpp it needs.
Layout OlmoScheduled(PipelineSchedule schedule) {
  Layout l = MakeLayout(16, 1, 1, 2, 4, 1);
  l.fsdp = true;
  l.vpp = schedule == PipelineSchedule::kInterleaved1F1B || schedule == PipelineSchedule::kDualPipeV ? 2 : 1;
  l.schedule = schedule;
  l.stage_layers.assign(static_cast<size_t>(l.pp * l.vpp), 2);
  return l;
}

TEST_CASE("export olmo-core: MoE with ep > 1 is HSDP with shard degree ep and the expert config") {
  const ModelSpec model = testing::ShippedModel("mixtral-8x7b");
  Layout l = MakeLayout(16, 1, 1, 2, 4, 1);  // dp 8 = 2 replicas x shard 4; edp 2
  l.fsdp = true;
  const std::string py = OlmoExport(BuildMap(l), &model);
  CHECK(Contains(py, "from olmo_core.distributed.parallel import DataParallelType, PipelineScheduleType\n"));
  CHECK(Contains(py, "dp_config = TransformerDataParallelConfig(\n"
                     "    name=DataParallelType.hsdp, num_replicas=2, shard_degree=4)\n"));
  CHECK(Contains(py, "ep_config = TransformerExpertParallelConfig(degree=4)  # over dp_shard, 2 local experts; "
                     "ep_dp 2 = num_replicas\n"));
  CHECK(Contains(py, "tp_config = None  # tp 1\n"));
  CHECK(Contains(py, "cp_config = None  # cp 1\n"));
  CHECK(Contains(py, "# Its world mesh (pp, dp_replicate, dp_shard, cp, tp), row-major"));
  CHECK(Contains(py, "degree=2, schedule=PipelineScheduleType.single_1F1B"));
  // What OLMo-core runs differently from the plan's costing, as comments.
  const std::vector<std::string> notes =
      TrainerCostNotes(Trainer::kOlmoCore, l, TrainerContext{nullptr, &model, nullptr});
  CHECK(testing::Count(py, "# Cost: ") == notes.size());
}

TEST_CASE("export olmo-core: a dense model with tp > 1 is exported (no expert rule for it)") {
  const ModelSpec model = testing::ShippedModel("llama3-70b");
  Layout l = MakeLayout(16, 2, 2, 2, 1, 2);  // etp = tp: the dense default, no experts to shard
  l.recompute = Recompute::Full();
  const std::string py = OlmoExport(BuildMap(l), &model);
  CHECK(Contains(py, "tp_config = TransformerTensorParallelConfig(degree=2)\n"));
  CHECK(Contains(py, "cp_config = TransformerContextParallelConfig.ulysses(degree=2)"));
  CHECK(Contains(py, "ep_config = None  # ep 1\n"));
  CHECK(Contains(py, "dp_config = TransformerDataParallelConfig(name=DataParallelType.ddp)\n"));
  CHECK(Contains(py, "mode=TransformerActivationCheckpointingMode.full"));
  CHECK(Contains(py, "# Its world mesh (pp, dp, cp, tp), row-major"));
}

TEST_CASE("export olmo-core: ring cp is zig-zag; fsdp without EP shards over dp; recompute modules") {
  Layout l = MakeLayout(16, 1, 2, 2, 1, 1);  // dp 4, no experts
  l.cp_style = CpStyle::kRing;
  l.fsdp = true;
  l.recompute = Recompute::Selective().With(RecomputeModule::kLayernorm);
  const std::string py = OlmoExport(BuildMap(l));
  CHECK(Contains(py, "cp_config = TransformerContextParallelConfig.zig_zag(degree=2)\n"));
  CHECK(Contains(py, "name=DataParallelType.fsdp, num_replicas=1, shard_degree=4)"));
  CHECK(Contains(py, "mode=TransformerActivationCheckpointingMode.selected_modules"));
  CHECK(Contains(py, "modules=[\"blocks.*.attention\", \"blocks.*.attention_norm\", \"blocks.*.feed_forward_norm\"])"));
}

TEST_CASE("export olmo-core: what OLMo-core cannot run is the trainer rules' refusal") {
  const ModelSpec model = testing::ShippedModel("mixtral-8x7b");
  SUBCASE("TP with EP") {
    Layout l = MakeLayout(16, 2, 1, 2, 4, 1);
    l.fsdp = true;
    OlmoRefusal(l, &model, "trainer_expert_tp");
  }
  SUBCASE("expert TP") {
    Layout l = MakeLayout(16, 2, 1, 2, 4, 2);
    l.fsdp = true;
    OlmoRefusal(l, &model, "trainer_expert_tp");
  }
  SUBCASE("EP over CP ranks: HSDP's shard groups hold no CP rank") {
    Layout l = MakeLayout(16, 1, 2, 2, 4, 1);  // dp 4, ep 4 = cp 2 x 2 of dp
    l.fsdp = true;
    OlmoRefusal(l, &model, "trainer_ep_needs_hsdp");
  }
  SUBCASE("EP without FSDP: HSDP shards") {
    OlmoRefusal(MakeLayout(16, 1, 1, 2, 4, 1), &model, "trainer_data_parallel");
  }
  SUBCASE("pp inside dp: pp must be outermost") {
    Layout l = MakeLayout(16, 1, 1, 2, 1, 1, kPpDpOrder);
    OlmoRefusal(l, nullptr, "trainer_order");
  }
  SUBCASE("dualpipev and zb-h1: PipelineScheduleType has neither") {
    for (PipelineSchedule s : {PipelineSchedule::kDualPipeV, PipelineSchedule::kZeroBubbleH1}) {
      CAPTURE(Name(s));
      CHECK(Contains(OlmoRefusal(OlmoScheduled(s), nullptr, "trainer_schedule"), Name(s)));
    }
  }
}

TEST_CASE("export olmo-core names PipelineScheduleType's member and the split points") {
  const std::string py = OlmoExport(BuildMap(OlmoScheduled(PipelineSchedule::kInterleaved1F1B)));
  CHECK(Contains(py, "schedule=PipelineScheduleType.interleaved_1F1B"));
  CHECK(Contains(py, "split_points=[2, 4, 6]"));  // stages of 2 layers: first layer of stages 1..3
  CHECK(Contains(OlmoExport(BuildMap(OlmoScheduled(PipelineSchedule::kGPipe))),
                 "schedule=PipelineScheduleType.gpipe"));
}

TEST_CASE("export olmo-core: after the trainer rules, OLMo-core's mesh always gives the map's groups") {
  // Every legal layout of 16 ranks over these degrees, orders and FSDP, for
  // a MoE and a dense model: the export is either the trainer rules'
  // refusal, word for word, or an export (its group check, which would call
  // a difference a bug, passing).
  const ModelSpec moe = testing::ShippedModel("mixtral-8x7b");
  const ModelSpec dense = testing::ShippedModel("llama3-70b");
  const ClusterSpec cluster = testing::MakeCluster(2);
  int exported = 0, refused = 0;
  for (const ModelSpec* model : {&moe, &dense})
    for (int tp : {1, 2})
      for (int cp : {1, 2})
        for (int pp : {1, 2})
          for (int ep : {1, 2, 4, 8})
            for (int etp : {1, 2})
              for (const char* order : {kDefaultOrder, kPpDpOrder})
                for (bool fsdp : {false, true}) {
                  if (etp > tp || (!model->is_moe() && ep > 1)) continue;
                  if ((16 / pp) % (ep * etp) != 0) continue;
                  Layout l = MakeLayout(16, tp, cp, pp, ep, etp, order);
                  l.fsdp = fsdp;
                  if (!CheckLayout(l, LegalityContext{&cluster, model, nullptr}).empty()) continue;
                  Result<RankMap> map = BuildRankMap(l, cluster);
                  if (!map.ok()) continue;
                  CAPTURE(FormatLayout(l));
                  CAPTURE(model->name);
                  const Status rules = TrainerRefusal(Trainer::kOlmoCore, l, TrainerContext{&cluster, model, nullptr});
                  Result<std::string> out =
                      ExportRankMap(map.value(), ExportFormat::kOlmoCore, {&cluster, model, nullptr});
                  if (rules.ok()) {
                    CHECK_MESSAGE(out.ok(), out.status().message());
                    ++exported;
                  } else {
                    REQUIRE_FALSE(out.ok());
                    CHECK(out.status().message() == rules.message());
                    ++refused;
                  }
                }
  CHECK(exported > 10);
  CHECK(refused > 10);
}

}  // namespace
}  // namespace foldplan
