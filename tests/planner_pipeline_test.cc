// The pipeline description (planner/pipeline.h): which virtual stage holds
// which layers, embedding and loss, and which pipeline rank runs it.
#include <doctest/doctest.h>

#include <algorithm>

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

TEST_CASE("94 layers on PP8 x VPP4: a chosen layout balances the ranks") {
  // 94 layers over 32 virtual stages do not divide (Megatron has no
  // first/last split with every stage divisible by vpp either). With the
  // loss weighing 2 layers and the embedding nothing, rank 7 (the loss) takes
  // 10 layers + 2 = 12 and the other seven 12 each: 7 x 12 + 10 = 94, so the
  // heaviest rank weighs 12 layers, the least any split can do (94 + 2 = 96
  // over 8 ranks).
  ModelSpec m = MakeMixtral();
  m.layers = 94;
  BlockWeights w;
  w.loss = 2;
  Layout l = MakeLayout(256, 2, 1, 8, 32, 1);
  l.vpp = 4;
  REQUIRE(NeedsChosenLayout(94, 8, 4));
  auto chosen = ChooseStageLayers(m, 8, 4, w);
  REQUIRE_MESSAGE(chosen.ok(), chosen.status().message());
  l.stage_layers = chosen.value();
  const PipelineDescription d = DescribePipeline(l, m, &w);
  for (int p = 0; p < 7; ++p) CHECK(d.ranks[static_cast<size_t>(p)].layers == 12);
  CHECK(d.ranks[7].layers == 10);
  CHECK(d.ranks[7].loss);
}

TEST_CASE("the first/last split wins ties with the balanced layout") {
  // 61 layers on pp 8: Megatron's 7/8 x 6/6 and any balance leave a rank
  // with 8 layers under equal weights: the tie goes to Megatron's split.
  ModelSpec m = MakeMixtral();
  m.layers = 61;
  auto chosen = ChooseStageLayers(m, 8, 1, BlockWeights{});
  REQUIRE(chosen.ok());
  CHECK(chosen.value() == std::vector<int>{7, 8, 8, 8, 8, 8, 8, 6});
}

TEST_CASE("MTP layers sit before the loss unless the layout places them") {
  ModelSpec m = DeepSeekLike();
  m.mtp_layers = 1;
  Layout l = MakeLayout(128, 1, 1, 8, 8, 1);
  l.vpp = 4;
  auto p = ParseLayout("pp=8,vpp=4,ep=8,etp=1,pp_layout=Et|(tt|)*30L", 128);
  REQUIRE(p.ok());
  // No m in the layout: the model's MTP layer goes to the last stage (rank 7).
  PipelineDescription d = DescribePipeline(p.value(), m);
  CHECK(d.stages.back().mtp_layers == 1);
  CHECK(d.ranks[7].mtp_layers == 1);
  CHECK(d.LayoutText() == "Et|(tt|)*30mL");
  // With m on stage 30 (rank 6): there.
  p = ParseLayout("pp=8,vpp=4,ep=8,etp=1,pp_layout=Et|(tt|)*29ttm|L", 128);
  REQUIRE(p.ok());
  d = DescribePipeline(p.value(), m);
  CHECK(d.stages[30].mtp_layers == 1);
  CHECK(d.ranks[6].mtp_layers == 1);
  CHECK(d.ranks[7].mtp_layers == 0);
  CHECK(d.boundaries() == 31);
}

TEST_CASE("explicit stages are checked against the model's layers and MTP layers") {
  ModelSpec m = DeepSeekLike();
  m.mtp_layers = 1;
  CHECK(CheckStages({31, 30}, {0, 1}, m, 2, 1).ok());
  CHECK(CheckStages({31, 30}, {}, m, 2, 1).ok());
  CHECK(CheckStages({31, 31}, {}, m, 2, 1).message() == "the layout places 62 decoder layers, the model has 61");
  CHECK(CheckStages({31, 30}, {1, 1}, m, 2, 1).message() == "the layout places 2 MTP layers (m), the model has 1");
  CHECK(CheckStages({31, 30}, {}, m, 4, 1).message() == "the layout lists 2 virtual stages, expected pp*vpp = 4");
}

// Regression: the stage sum was an int; 4096 stages of 2^20 layers and one of
// 61 wrapped to 61 and passed for a 61-layer model's layers.
TEST_CASE("stage lists whose sum overflows an int are not taken for the model's layers") {
  const ModelSpec m = DeepSeekLike();
  Layout l = MakeLayout(4097, 1, 1, 4097, 1, 1);
  l.stage_layers.assign(4096, 1 << 20);
  l.stage_layers.push_back(61);
  const PipelineDescription d = DescribePipeline(l, m);
  long long placed = 0;
  for (const VirtualStage& s : d.stages) placed += s.layers;
  CHECK(placed == 61);
}

// Regression: a pipeline of pp x vpp stages was built before its size was
// judged, so pp 2^20 x vpp 1024 allocated 2^30 stage counts.
TEST_CASE("more virtual stages than a model can fill are refused before any is built") {
  const ModelSpec m = DeepSeekLike();
  auto chosen = ChooseStageLayers(m, 1 << 20, 1024, WeightsOrDefault(nullptr));
  REQUIRE_FALSE(chosen.ok());
  CHECK(chosen.status().message() ==
        "61 layers cannot fill 1073741824 virtual stages (1048576 x 1024): every stage but the first and last needs a "
        "layer");
  // The most a model can fill: one layer per stage, the first and last empty.
  CHECK(ChooseStageLayers(m, 63, 1, WeightsOrDefault(nullptr)).ok());
  CHECK_FALSE(ChooseStageLayers(m, 64, 1, WeightsOrDefault(nullptr)).ok());
}

TEST_CASE("PipelineRankOf: c % pp under every schedule but DualPipeV, whose second chunk runs back") {
  for (PipelineSchedule s : kAllPipelineSchedules) {
    if (s == PipelineSchedule::kDualPipeV) continue;
    for (int c = 0; c < 12; ++c) CHECK(PipelineRankOf(s, 4, c) == c % 4);
  }
  std::vector<int> v;
  for (int c = 0; c < 8; ++c) v.push_back(PipelineRankOf(PipelineSchedule::kDualPipeV, 4, c));
  CHECK(v == std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0});
  CHECK(PipelineRankOf(PipelineSchedule::kDualPipeV, 1, 1) == 0);
}

TEST_CASE("DualPipeV on pp 4: stages 0..7 on ranks 0,1,2,3,3,2,1,0; the embedding and the loss on rank 0") {
  Layout l = MakeLayout(64, 1, 1, 4, 8, 1);
  l.vpp = 2;
  l.schedule = PipelineSchedule::kDualPipeV;
  const PipelineDescription d = DescribePipeline(l, MakeMixtral());  // 32 layers: 4 per stage
  CHECK(d.schedule == PipelineSchedule::kDualPipeV);
  REQUIRE(d.stages.size() == 8);
  std::vector<int> rank, chunk;
  for (const VirtualStage& s : d.stages) {
    rank.push_back(s.pipeline_rank);
    chunk.push_back(s.chunk);
  }
  CHECK(rank == std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0});
  CHECK(chunk == std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1});
  CHECK(d.stages[7].first_layer == 28);  // model order: the last stage holds the last layers
  CHECK(d.ranks[0].embedding);
  CHECK(d.ranks[0].loss);
  for (int p = 1; p < 4; ++p) {
    CHECK_FALSE(d.ranks[static_cast<size_t>(p)].embedding);
    CHECK_FALSE(d.ranks[static_cast<size_t>(p)].loss);
  }
  for (const PipelineRank& r : d.ranks) CHECK(r.layers == 8);
  // The turn at rank 3 (stage 3 to stage 4) stays on the rank.
  CHECK(d.boundaries() == 6);
  l.schedule.reset();  // the implied interleaved 1F1B: 7 crossings, the loss on rank 3
  CHECK(DescribePipeline(l, MakeMixtral()).boundaries() == 7);
  CHECK(DescribePipeline(l, MakeMixtral()).ranks[3].loss);
}

TEST_CASE("a chosen DualPipeV layout weighs the embedding and the loss together on rank 0") {
  // 30 layers on pp 4 x vpp 2 do not divide. Embedding 1 and loss 2 layers'
  // weight, both on rank 0 under the V: 30 + 3 = 33 over 4 ranks, so the
  // heaviest rank weighs at least 9; the chosen layout reaches it, and gives
  // rank 0 the fewest layers.
  ModelSpec m = MakeMixtral();
  m.layers = 30;
  BlockWeights w;
  w.embedding = 1;
  w.loss = 2;
  auto chosen = ChooseStageLayers(m, 4, 2, w, PipelineSchedule::kDualPipeV);
  REQUIRE_MESSAGE(chosen.ok(), chosen.status().message());
  Layout l = MakeLayout(64, 1, 1, 4, 8, 1);
  l.vpp = 2;
  l.schedule = PipelineSchedule::kDualPipeV;
  l.stage_layers = chosen.value();
  const PipelineDescription d = DescribePipeline(l, m, &w);
  double heaviest = 0;
  for (const PipelineRank& r : d.ranks) {
    heaviest = std::max(heaviest, r.layers + (r.embedding ? w.embedding : 0) + (r.loss ? w.loss : 0));
  }
  CHECK(heaviest == 9);
  for (int p = 1; p < 4; ++p) CHECK(d.ranks[0].layers < d.ranks[static_cast<size_t>(p)].layers);
}
