// The pipeline description (planner/pipeline.h): which virtual stage holds
// which layers, embedding and loss, and which pipeline rank runs it.
#include <doctest/doctest.h>

#include "fixtures.h"
#include "planner/pipeline.h"

using namespace foldplan;
using foldplan::testing::MakeLayout;
using foldplan::testing::MakeMixtral;

namespace {

// DeepSeek-V3's layer structure: 61 layers, the first 3 dense.
ModelSpec DeepSeekLike() {
  ModelSpec m = MakeMixtral();
  m.layers = 61;
  m.moe->first_k_dense = 3;
  return m;
}

}  // namespace

TEST_CASE("virtual stage c runs on rank c % pp as chunk c / pp and holds the next layers") {
  // 32 layers on pp 4 x vpp 2: 8 virtual stages of 4 layers; stage 5 is
  // rank 1's second chunk and starts at layer 5 x 4 = 20.
  Layout l = MakeLayout(64, 1, 1, 4, 8, 1);
  l.vpp = 2;
  const PipelineDescription d = DescribePipeline(l, MakeMixtral());
  CHECK(d.schedule == PipelineSchedule::kInterleaved1F1B);
  REQUIRE(d.stages.size() == 8);
  CHECK(d.stages[5].pipeline_rank == 1);
  CHECK(d.stages[5].chunk == 1);
  CHECK(d.stages[5].first_layer == 20);
  CHECK(d.stages[5].layers == 4);
  // Each rank holds two chunks: 8 layers, all MoE.
  REQUIRE(d.ranks.size() == 4);
  for (const PipelineRank& r : d.ranks) {
    CHECK(r.layers == 8);
    CHECK(r.moe_layers == 8);
  }
  CHECK(d.stages.front().embedding);
  CHECK(d.stages.back().loss);
  CHECK(d.ranks[0].embedding);
  CHECK_FALSE(d.ranks[0].loss);
  CHECK(d.ranks[3].loss);  // virtual stage 7 = rank 7 % 4
}

TEST_CASE("Megatron's split when the layers do not divide; MoE counted from first_k_dense") {
  // 61 layers on 16 stages: 3/4 x 14/2 (pipeline_split.h); stage 0 holds
  // layers 0-2, all dense; stage 1 holds layers 3-6, all MoE.
  const PipelineDescription d = DescribePipeline(MakeLayout(128, 1, 1, 16, 8, 1), DeepSeekLike());
  CHECK(d.schedule == PipelineSchedule::k1F1B);
  CHECK(d.StageLayers() == std::vector<int>{3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 2});
  CHECK(d.ranks[0].moe_layers == 0);
  CHECK(d.ranks[0].dense_layers() == 3);
  CHECK(d.ranks[1].moe_layers == 4);
  CHECK(d.stages[15].first_layer == 3 + 14 * 4);
  CHECK(d.ranks[15].loss);
}

TEST_CASE("the layout's own stage layers when they cover the model, else the split") {
  Layout l = MakeLayout(128, 1, 1, 16, 8, 1);
  l.stage_layers = {1, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};  // 61 layers
  CHECK(DescribePipeline(l, DeepSeekLike()).StageLayers() == l.stage_layers);
  CHECK(DescribePipeline(l, DeepSeekLike()).ranks[1].moe_layers == 2);  // layers 1-4: 3 and 4 are MoE
  l.stage_layers.back() = 5;  // 62 layers: not this model's; Megatron's split instead
  CHECK(DescribePipeline(l, DeepSeekLike()).StageLayers().front() == 3);
}

TEST_CASE("no Megatron split: an even spread, the first stages one layer more") {
  // 32 layers on pp 8 x vpp 3 = 24 virtual stages: no split with every
  // stage divisible by vpp, so 32 / 24 = 1 each and the first 32 % 24 = 8 get 2.
  Layout l = MakeLayout(64, 1, 1, 8, 8, 1);
  l.vpp = 3;
  const std::vector<int> layers = DescribePipeline(l, MakeMixtral()).StageLayers();
  REQUIRE(layers.size() == 24);
  CHECK(layers[7] == 2);
  CHECK(layers[8] == 1);
  CHECK(DescribePipeline(l, MakeMixtral()).ranks[0].layers == 2 + 1 + 1);  // stages 0, 8, 16
}
