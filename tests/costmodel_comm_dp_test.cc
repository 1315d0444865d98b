// The data-parallel volumes of the communication plan (costmodel/comm_plan.h):
// per rank, the parameters of the pipeline rank holding the most, on the
// pipeline description the rest of the evaluation uses. Each test states
// the arithmetic, then checks the number it implies. Derivations:
// doc/cost-model-comm.md section 6 ("Parameters per rank", "Data parallel").
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "costmodel_comm_fixtures.h"
#include "costmodel/comm_plan.h"
#include "fixtures.h"
#include "inputs/loader.h"
#include "planner/group_placement.h"
#include "planner/pipeline.h"
#include "topology_fixtures.h"

namespace foldplan {
namespace {

using testing::FindOp;
using testing::MakeCluster;
using Setup = testing::CommSetup;

ModelSpec Load(const char* name) {
  Result<ModelSpec> model = LoadModel(std::string(FOLDPLAN_SOURCE_DIR) + "/data/models/" + name + ".json");
  REQUIRE_MESSAGE(model.ok(), model.status().message());
  return model.value();
}

// DeepSeek-V3 on 4 DGX nodes: pp 4 x dp 8 (tp 1), ep 8, edp 1.
Setup DeepSeekPp4() {
  Setup s(MakeCluster(4), Load("deepseek-v3"));
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

}  // namespace
}  // namespace foldplan
