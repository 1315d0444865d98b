// The data-parallel volumes of the communication plan (costmodel/comm_plan.h):
// per rank, the parameters of the pipeline rank holding the most, on the
// pipeline description the rest of the evaluation uses. Each test states
// the arithmetic, then checks the number it implies. Derivations:
// doc/cost-model-comm.md section 6 ("Parameters per rank", "Data parallel").
#include <algorithm>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "costmodel_comm_fixtures.h"
#include "costmodel/comm_plan.h"
#include "costmodel/memory.h"
#include "costmodel/rank_params.h"
#include "fixtures.h"
#include "inputs/loader.h"
#include "planner/group_placement.h"
#include "planner/pipeline.h"
#include "seeded_draws.h"
#include "topology_fixtures.h"
#include "shipped_model.h"

namespace foldplan {
namespace {

using testing::FindOp;
using testing::MakeCluster;
using Setup = testing::CommSetup;

using foldplan::testing::ShippedModel;

// DeepSeek-V3 on 4 DGX nodes: pp 4 x dp 8 (tp 1), ep 8, edp 1.
Setup DeepSeekPp4() {
  Setup s(MakeCluster(4), ShippedModel("deepseek-v3"));
  s.layout.world = 32;
  s.layout.pp = 4;
  s.layout.dp = 8;
  s.layout.ep = 8;
  s.layout.etp = 1;
  s.layout.edp = 1;
  s.layout.mbs = 1;
  return s;
}

double GradBytes(const std::vector<CommOp>& ops) {
  const CommOp* op = FindOp(ops, "dp_grad_reducescatter");
  REQUIRE(op);
  return op->bytes;
}

TEST_CASE("the data-parallel volume is that of the pipeline split the plan is given") {
  // DeepSeek-V3's 61 layers do not divide over pp 4, so block weights
  // choose the split (CostModel passes its description, built with its
  // weights). Weights charging the loss stage move layers off the last
  // rank: a split other than the default weights' (layers alike). The plan
  // on that description reduces its ranks' parameters: the same bytes as
  // a layout stating that split explicitly, other bytes than the default
  // split's.
  const Setup s = DeepSeekPp4();
  BlockWeights heavy_loss;
  heavy_loss.loss = 4;
  const PipelineDescription chosen = DescribePipeline(s.layout, s.model, &heavy_loss);
  REQUIRE(chosen.StageLayers() != DescribePipeline(s.layout, s.model).StageLayers());
  Layout stated = s.layout;
  stated.stage_layers = chosen.StageLayers();
  stated.explicit_stages = true;
  Result<LayoutPlacement> placement = PlaceGroups(s.layout, s.topo);
  REQUIRE(placement.ok());
  const double on_chosen = GradBytes(BuildCommPlan(s.layout, s.ctx(), *placement, chosen));
  CHECK(on_chosen == GradBytes(BuildCommPlan(stated, s.ctx(), *placement)));
  CHECK(on_chosen != GradBytes(s.Plan()));
}

TEST_CASE("DeepSeek-V3 at pp 2: the MTP stage reduces its copy of the input embedding too") {
  // DeepSeek-V3 (untied, V 129,280, H 7,168, 61 layers of which the first
  // 3 dense, one MTP module of a MoE layer) at pp 2, tp 2, stages of 21 and
  // 40 layers. Rank 1 holds 40 MoE layers, the MTP module (its MoE layer,
  // eh_proj 2 H^2 TP-split, enorm, hnorm and its final norm 3 H), the final
  // norm H and the output layer V H / tp; and, as Megatron builds the
  // embedding on the MTP stage (and keeps it equal to the first stage's),
  // its own copy of the input embedding, V H / tp more. Per rank:
  //   P_dense = 41 moe + 2 H^2 / tp + 3 H + H + 2 V H / tp
  // (without the copy: 4 V H / tp = 1.85 GB fewer bytes per reduce-scatter)
  // with moe = (attention + shared experts) / tp + MLA down-projections and
  // norms + router + gate, a MoE layer outside its routed experts. Rank 0
  // (the embedding, 3 dense and 18 MoE layers) holds less, so the
  // gradient reduce-scatter over DP x CP moves 4 B x P_dense, the count the
  // memory model (and the optimizer step) uses for rank 1.
  Setup s = DeepSeekPp4();
  s.layout.pp = 2;
  s.layout.tp = 2;
  s.layout.dp = 8;
  s.layout.edp = 2;
  s.layout.stage_layers = {21, 40};
  s.layout.explicit_stages = true;
  const PipelineDescription pipeline = DescribePipeline(s.layout, s.model);
  REQUIRE(pipeline.ranks[1].moe_layers == 40);
  REQUIRE(pipeline.ranks[1].mtp_layers == 1);
  REQUIRE(pipeline.ranks[1].loss);
  REQUIRE_FALSE(pipeline.ranks[1].embedding);
  REQUIRE(s.model.embedding_params().output_layer > 0);  // untied

  const double tp = 2, h = 7168, vocab = 129280;
  const LayerParams p = s.model.layer_params(true);
  const double moe = double(p.attention + p.shared_experts) / tp + double(p.attention_replicated) +
                     double(p.norms) + double(p.router) + double(p.shared_expert_gate);
  const double p_dense = 41 * moe + 2 * h * h / tp + 3 * h + h + 2 * vocab * h / tp;
  const double bytes = GradBytes(s.Plan());
  CHECK(bytes == doctest::Approx(4 * p_dense).epsilon(1e-12));
  const MemoryModel memory(s.model, s.job, s.cluster);
  CHECK(bytes == 4 * memory.ParamsOnStage(s.layout, pipeline, 1).dense);
}

TEST_CASE("Largest is the largest share OnRank gives any pipeline rank, ranks holding alike or not") {
  // Largest skips a rank holding what the previous one holds; the
  // reference asks OnRank of every rank. Pipelines as DescribePipeline
  // splits them, and with ranks repeated or differing from their
  // neighbour in one field only (embedding, loss, MTP, MoE layers).
  for (const char* name : {"deepseek-v3", "mixtral-8x7b", "llama3-70b"}) {
    CAPTURE(name);
    const ModelSpec model = ShippedModel(name);
    const RankParamCounter counter(model);
    for (const int pp : {1, 2, 3, 4, 8, 16}) {
      for (const int vpp : {1, 2}) {
        if (pp * vpp > model.layers) continue;
        Layout l;
        l.pp = pp;
        l.vpp = vpp;
        l.tp = 2;
        l.ep = model.is_moe() ? 8 : 1;
        l.etp = 1;
        const PipelineDescription described = DescribePipeline(l, model);
        std::vector<PipelineDescription> pipelines = {described};
        PipelineDescription varied = described;
        varied.ranks.clear();
        for (const PipelineRank& r : described.ranks) {
          PipelineRank embedding = r, loss = r, mtp = r, moe = r;
          embedding.embedding = !r.embedding;
          loss.loss = !r.loss;
          mtp.mtp_layers = r.mtp_layers + 1;
          moe.moe_layers = std::max(0, r.moe_layers - 1);
          for (const PipelineRank& v : {r, r, embedding, r, loss, r, mtp, mtp, r, moe, r}) varied.ranks.push_back(v);
        }
        pipelines.push_back(varied);
        for (const PipelineDescription& pipeline : pipelines) {
          CAPTURE(pp);
          CAPTURE(vpp);
          StageParams want;
          for (const PipelineRank& r : pipeline.ranks) {
            const StageParams on = counter.OnRank(l, r);
            want.dense = std::max(want.dense, on.dense);
            want.expert = std::max(want.expert, on.expert);
          }
          const StageParams got = counter.Largest(l, pipeline);
          CHECK(testing::Bits(got.dense) == testing::Bits(want.dense));
          CHECK(testing::Bits(got.expert) == testing::Bits(want.expert));
        }
      }
    }
  }
}

}  // namespace
}  // namespace foldplan
