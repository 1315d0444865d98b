// The maxtext export (planner/export_maxtext.cc): MaxText's mesh, pipeline,
// context-parallel and batch settings for a layout. Facts read in MaxText's
// sources at e591f30c (doc/trainers.md "maxtext"): one mesh data, stage,
// fsdp, context, tensor, expert (slowest first); one pipelined layer kind,
// pipeline_parallel_layers of it dividing over the stages;
// context_parallel_strategy all_gather, ring, ulysses or usp. What MaxText
// cannot run is refused by the trainer rules (TrainerRefusal), whose message
// the export returns unchanged; the export's own checks never fire after
// them. Also the layout-only mesh and ICI x DCN split the rules use
// (export_util's MaxTextMeshShape, SplitIciDcnOf). tests/trainer_exports/
// maxtext.py checks the same export from Python.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "export_fixtures.h"
#include "fixtures.h"
#include "planner/export_util.h"
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

std::string MtExport(const RankMap& m, const ModelSpec* model = nullptr, const JobSpec* job = nullptr) {
  Result<std::string> out = ExportRankMap(m, ExportFormat::kMaxText, {nullptr, model, job});
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  return *out;
}

// `text` with comment lines joined: a wrapped sentence on one line.
std::string MtFlat(std::string text) {
  for (size_t at = text.find("\n# "); at != std::string::npos; at = text.find("\n# ", at)) text.replace(at, 3, " ");
  return text;
}

// The export's refusal of `l`: the trainer rules' message, naming `rule`.
std::string MtRefusal(const Layout& l, const ModelSpec* model, const char* rule, int nodes = 2) {
  const ClusterSpec cluster = testing::MakeCluster(nodes);
  Result<RankMap> map = BuildRankMap(l, cluster);
  REQUIRE_MESSAGE(map.ok(), map.status().message());
  Result<std::string> out = ExportRankMap(map.value(), ExportFormat::kMaxText, {&cluster, model, nullptr});
  REQUIRE_FALSE(out.ok());
  const std::string why = out.status().message();
  const Status rules = TrainerRefusal(Trainer::kMaxText, l, TrainerContext{&cluster, model, nullptr});
  REQUIRE_FALSE(rules.ok());
  CHECK(why == rules.message());
  CHECK(Contains(why, "maxtext cannot run this layout"));
  CHECK(Contains(why, std::string(rule) + ": "));
  return why;
}

TEST_CASE("export maxtext: a folded MoE layout: dp 8 = fsdp 2 x expert 4, pp across nodes") {
  const ModelSpec model = testing::ShippedModel("mixtral-8x7b");  // 32 layers, every one MoE
  Layout l = MakeLayout(16, 1, 1, 2, 4, 1);
  l.fsdp = true;
  const std::string y = MtExport(BuildMap(l), &model);
  CHECK(Contains(y, "ici_fsdp_parallelism: 2\n"));
  CHECK(Contains(y, "ici_expert_parallelism: 4\n"));
  CHECK(Contains(y, "ici_pipeline_parallelism: 1\n"));
  CHECK(Contains(y, "dcn_pipeline_parallelism: 2\n"));
  CHECK(Contains(y, "pipeline_parallel_layers: 32  # every decoder layer, 16 per virtual stage\n"));
  CHECK(Contains(y, "num_layers_per_pipeline_stage: 16\n"));
  CHECK_FALSE(Contains(y, "context_parallel_strategy"));  // cp 1
  CHECK(Contains(y, "# dp 8 = fsdp 2 x expert 4"));
  const std::vector<std::string> notes =
      TrainerCostNotes(Trainer::kMaxText, l, TrainerContext{nullptr, &model, nullptr});
  CHECK(testing::Count(y, "# Cost: ") == notes.size());
}

TEST_CASE("export maxtext: context_parallel_strategy is the plan's CP style") {
  Layout l = MakeLayout(16, 1, 2, 1, 1, 1);  // cp 2 fastest, dp 8 outside it
  CHECK(Contains(MtExport(BuildMap(l)), "context_parallel_strategy: ulysses"));
  l.cp_style = CpStyle::kRing;
  const std::string y = MtExport(BuildMap(l));
  CHECK(Contains(y, "context_parallel_strategy: ring"));
  CHECK(Contains(y, "ici_context_parallelism: 2\n"));
}

TEST_CASE("export maxtext: per_device_batch_size is the global batch over every device") {
  JobSpec job;
  job.seq_len = 8192;
  job.global_batch = 1024;
  Layout l = MakeLayout(16, 2, 1, 2, 1, 2);  // dp 4: 256 micro-batches of 1; 1024 / 16 devices
  l.fsdp = true;
  std::string y = MtExport(BuildMap(l), nullptr, &job);
  CHECK(Contains(y, "per_device_batch_size: 64\n"));
  CHECK(Contains(y, "max_target_length: 8192"));
  CHECK(Contains(MtFlat(y), "1024 sequences = mbs 1 x dp 4 x 256 micro-batches"));
  job.global_batch = 100;  // 6.25 per device: MaxText's count may be fractional
  CHECK(Contains(MtExport(BuildMap(l), nullptr, &job), "per_device_batch_size: 6.25\n"));
  CHECK_FALSE(Contains(MtExport(BuildMap(l)), "per_device_batch_size:"));  // no job, no batch
}

TEST_CASE("export maxtext: dp / ep goes on the axis the order's groups need") {
  SUBCASE("no pipeline: fsdp for a layout with FSDP, else data") {
    Layout l = MakeLayout(16, 1, 1, 1, 4, 1);  // dp 16 = 4 x expert 4; a node holds expert 4 x 2
    CHECK(Contains(MtExport(BuildMap(l)), "ici_data_parallelism: 2\n"));
    l.fsdp = true;
    CHECK(Contains(MtExport(BuildMap(l)), "ici_fsdp_parallelism: 2\n"));
  }
  SUBCASE("pp inside dp (the default order) needs fsdp, inside stage, even without FSDP") {
    const Layout l = MakeLayout(16, 2, 1, 2, 1, 2);  // dp 4, fsdp 0
    const std::string y = MtFlat(MtExport(BuildMap(l)));
    CHECK(Contains(y, "ici_fsdp_parallelism: 4\n"));
    CHECK(Contains(y, "ici_data_parallelism: 1\n"));
    CHECK(Contains(y, "dp / ep 4 is on fsdp (the order needs it: dp comes before pp"));
    CHECK(Contains(y, "foldplan costed Megatron's distributed optimizer"));
  }
  SUBCASE("pp inside dp's digits (tp-cp-ep-pp-dp) needs data, outside stage, even with FSDP") {
    Layout l = MakeLayout(16, 2, 1, 2, 1, 2, kPpDpOrder);
    l.fsdp = true;
    const std::string y = MtFlat(MtExport(BuildMap(l)));
    CHECK(Contains(y, "ici_data_parallelism: 2\n"));  // dp 4: 2 inside a node, 2 across
    CHECK(Contains(y, "dcn_data_parallelism: 2\n"));
    CHECK(Contains(y, "dp / ep 4 is on data (the order needs it: dp comes after pp"));
  }
}

TEST_CASE("export maxtext: what MaxText cannot run is the trainer rules' refusal") {
  const ModelSpec mixtral = testing::ShippedModel("mixtral-8x7b");
  SUBCASE("etp != tp") { MtRefusal(MakeLayout(16, 2, 1, 2, 4, 1), &mixtral, "trainer_expert_tp"); }
  SUBCASE("ep not dividing dp: the expert axis is a batch axis") {
    MtRefusal(MakeLayout(16, 1, 4, 1, 8, 1), &mixtral, "trainer_ep_ranks");  // dp 4, ep 8 over cp
  }
  SUBCASE("ep over cp: MaxText's expert axis holds no context rank") {
    MtRefusal(MakeLayout(16, 1, 2, 2, 4, 1), &mixtral, "trainer_order");  // dp 4, ep 4 = cp 2 x 2 of dp
  }
  SUBCASE("DeepSeek-V3 with pp > 1: its dense and MoE layers are two kinds") {
    const ModelSpec deepseek = testing::ShippedModel("deepseek-v3");
    CHECK(Contains(MtRefusal(MakeLayout(16, 1, 1, 2, 8, 1), &deepseek, "trainer_pipeline_split"), "deepseek-v3"));
    // Without a pipeline nothing is split: exported.
    CHECK_FALSE(Contains(MtExport(BuildMap(MakeLayout(16, 1, 1, 1, 8, 1)), &deepseek), "pipeline_parallel_layers"));
  }
  SUBCASE("an uneven split") {
    Layout l = MakeLayout(16, 1, 1, 2, 4, 1);
    l.stage_layers = {5, 7};
    MtRefusal(l, nullptr, "trainer_pipeline_split");
  }
  SUBCASE("NVLink domains holding unequal numbers of ranks: no ICI x DCN split") {
    MtRefusal(MakeLayout(12, 1, 1, 1, 4, 1), &mixtral, "trainer_mesh_split");  // 8 ranks, then 4
  }
}

TEST_CASE("export maxtext: MaxTextMeshShape and SplitIciDcnOf, the layout-only mesh and split") {
  using export_util::MaxTextMeshShape;
  using export_util::SplitIciDcnOf;
  Layout l = MakeLayout(16, 1, 1, 2, 4, 1);
  l.fsdp = true;
  CHECK(MaxTextMeshShape(l) == std::vector<int>{1, 2, 2, 1, 1, 4});
  CHECK(MaxTextMeshShape(MakeLayout(16, 1, 4, 1, 8, 1)).empty());  // ep 8 does not divide dp 4
  auto split = SplitIciDcnOf({1, 2, 2, 1, 1, 4}, 8, 2);
  REQUIRE(split.ok());
  CHECK(split->ici == std::vector<int>{1, 1, 2, 1, 1, 4});
  CHECK(split->dcn == std::vector<int>{1, 2, 1, 1, 1, 1});
  CHECK(split->granule_ranks == 8);
  CHECK(split->granules == 2);
  CHECK_FALSE(SplitIciDcnOf({1, 1, 3, 1, 1, 4}, 8, 2).ok());  // 8 is no product of the innermost 4, 3
  CHECK_FALSE(SplitIciDcnOf({1, 2, 2, 1, 1, 4}, 8, 1).ok());  // 8 ranks do not hold 16
}

TEST_CASE("export maxtext: after the trainer rules, MaxText's mesh always gives the map's groups and split") {
  // Every legal layout of 16 ranks over these degrees, orders and FSDP, for
  // a model whose layers are all MoE: the export is either the trainer
  // rules' refusal, word for word, or an export whose split the layout-only
  // SplitIciDcnOf gives too.
  const ModelSpec model = testing::ShippedModel("mixtral-8x7b");
  int exported = 0, refused = 0;
  for (int nodes : {2, 4})
    for (int tp : {1, 2})
      for (int cp : {1, 2})
        for (int pp : {1, 2})
          for (int ep : {1, 2, 4, 8})
            for (int etp : {1, 2})
              for (const char* order : {kDefaultOrder, kPpDpOrder})
                for (bool fsdp : {false, true}) {
                  const ClusterSpec cluster = testing::MakeCluster(nodes, 8, nodes == 4 ? 4 : 8);
                  if (etp > tp || (16 / pp) % (ep * etp) != 0) continue;
                  Layout l = MakeLayout(16, tp, cp, pp, ep, etp, order);
                  l.fsdp = fsdp;
                  if (!CheckLayout(l, LegalityContext{&cluster, &model, nullptr}).empty()) continue;
                  Result<RankMap> map = BuildRankMap(l, cluster);
                  if (!map.ok()) continue;
                  CAPTURE(FormatLayout(l));
                  CAPTURE(nodes);
                  const Status rules = TrainerRefusal(Trainer::kMaxText, l, TrainerContext{&cluster, &model, nullptr});
                  Result<std::string> out =
                      ExportRankMap(map.value(), ExportFormat::kMaxText, {&cluster, &model, nullptr});
                  if (!rules.ok()) {
                    REQUIRE_FALSE(out.ok());
                    CHECK(out.status().message() == rules.message());
                    ++refused;
                    continue;
                  }
                  CHECK_MESSAGE(out.ok(), out.status().message());
                  ++exported;
                  const std::vector<int> shape = export_util::MaxTextMeshShape(l);
                  auto from_map = export_util::SplitIciDcn(map.value(), shape);
                  REQUIRE(from_map.ok());
                  auto from_layout = export_util::SplitIciDcnOf(shape, from_map->granule_ranks, from_map->granules);
                  REQUIRE(from_layout.ok());
                  CHECK(from_layout->ici == from_map->ici);
                  CHECK(from_layout->dcn == from_map->dcn);
                }
  CHECK(exported > 10);
  CHECK(refused > 10);
}

}  // namespace
}  // namespace foldplan
