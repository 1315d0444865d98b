// The published Megatron recipes for Qwen3-235B-A22B on 256 H100s
// (/work/shared/reference/recipes.md section 2) ran, so the memory model
// must find them fitting in an 80 GB H100 (79.6 GiB as nvidia-smi reports
// it) with the shipped default job (S 4096, routing imbalance 1.2) and a
// global batch of 2048. The first test is doc/cost-model-memory.md's
// worked example, term by term.
#include <doctest/doctest.h>

#include <string>

#include "costmodel/memory.h"
#include "inputs/loader.h"
#include "planner/layout.h"

using namespace foldplan;

namespace {

struct Inputs {
  ModelSpec model;
  JobSpec job;
  ClusterSpec cluster;
};

Inputs Qwen3OnH100() {
  auto model = LoadModel("qwen3-235b-a22b");
  auto job = LoadJob("default");
  auto cluster = LoadCluster("h100-dgx-128n");
  REQUIRE(model.ok());
  REQUIRE(job.ok());
  REQUIRE(cluster.ok());
  Inputs in{model.value(), job.value(), cluster.value()};
  in.job.global_batch = 2048;
  return in;
}

Layout Parse(const std::string& text, const JobSpec& job) {
  auto l = ParseLayout(text, 256, &job);
  REQUIRE_MESSAGE(l.ok(), l.status().message());
  return l.value();
}

}  // namespace

// TP2 PP8 VPP4 EP32 ETP1 (dp 16, edp 1), mbs 1, recompute layernorm +
// moe_act, DeepEP. Stage 0 holds 12 MoE layers and the input embedding.
// Per rank and layer: dense 71,303,168 / tp 2 + q/k norms 256 + norms 8,192
// + router 524,288 = 36,184,320; experts 128 x 3 x 4096 x 1536 / ep 32 =
// 75,497,472.
//   parameters  2 B x (12 x 36,184,320 + 151936 x 4096 / 2 = 745,376,768
//               + 12 x 75,497,472 = 905,969,664) = 3,302,692,864
//   gradients   4 B x 1,651,346,432
//   optimizer   12 B x (745,376,768 / 16 + 905,969,664 / 1) = 11,430,668,544
// Activations: T = 4096 / 2 = 2048 rows, R = 1.2 x 2048 x 8 = 19,660.8.
//   attention   2048 x (68,608 + 256 log-sum-exp) = 141,033,472 (the input
//               norm is fused into linear_qkv: layernorm cannot drop it)
//   MoE         2048 x (8,192 norm input + 1,152 router) = 19,136,512 (the
//               norm output dropped by layernorm)
//   experts     19,660.8 x (8,192 + 6,144 + 4) = 281,935,872 (fc2 input
//               dropped by moe_act)
//   one layer   442,105,856; 9.75 micro-batches in flight (8 + 7/4) x 12
//               layers: 51,726,385,152 B = 48.17 GiB
//   working set the MoE norm output 16,777,216 + the fc2 inputs
//               19,660.8 x 3,072 = 60,397,978 (both alive in fc2's backward)
TEST_CASE("the worked example: Qwen3-235B TP2 PP8 VPP4 EP32 layernorm+moe_act DeepEP fits an H100") {
  const Inputs in = Qwen3OnH100();
  const MemoryModel model(in.model, in.job, in.cluster);
  const Layout l = Parse(
      "tp=2,pp=8,vpp=4,ep=32,etp=1,mbs=1,recompute=layernorm+moe_act,dispatcher=deepep", in.job);
  REQUIRE(l.dp == 16);
  REQUIRE(l.edp == 1);
  const PipelineDescription pipeline = DescribePipeline(l, in.model);
  REQUIRE(pipeline.ranks[0].layers == 12);
  const MemoryBreakdown s0 = model.EstimateStage(l, 0);
  CHECK(s0.bytes_of(memory_term::kParameters) == 3'302'692'864.0);
  CHECK(s0.bytes_of(memory_term::kGradients) == 4 * 1'651'346'432.0);
  CHECK(s0.bytes_of(memory_term::kOptimizerStates) == doctest::Approx(11'430'668'544.0));
  CHECK(model.LayerActivationBytes(l, true, l.recompute) == doctest::Approx(442'105'856.0));
  CHECK(s0.inflight_microbatches == 9.75);
  CHECK(s0.bytes_of(memory_term::kActivations) == doctest::Approx(51'726'385'152.0));
  CHECK(s0.bytes_of(memory_term::kRecomputeWorkingSet) ==
        doctest::Approx(16'777'216.0 + 60'397'977.6));
  CHECK(s0.bytes_of(memory_term::kFlexDispatcherBuffers) == 341'062'720.0);
  const MemoryBreakdown worst = model.Estimate(l);
  CHECK(worst.fits);
  CHECK(worst.peak_gib() < 79.6);
  CHECK(worst.peak_gib() > 70);  // most of the GPU: the recipe is not generous
  // The same with the EP all-to-all overlap (the recipe's variant).
  Layout overlap = l;
  overlap.a2a_overlap = true;
  CHECK(model.Estimate(overlap).fits);
}

TEST_CASE("the other published Qwen3-235B recipes on 256 H100s fit") {
  const Inputs in = Qwen3OnH100();
  const MemoryModel model(in.model, in.job, in.cluster);
  for (const char* text :
       {"tp=2,pp=1,ep=8,etp=1,mbs=4,recompute=full,dispatcher=deepep,fsdp=1",
        "tp=2,pp=32,vpp=3,ep=8,etp=1,mbs=1,recompute=layernorm+moe_act,dispatcher=alltoall",
        "tp=4,pp=8,vpp=4,ep=8,etp=1,mbs=1,recompute=none,dispatcher=deepep"}) {
    CAPTURE(text);
    const Layout l = Parse(text, in.job);
    const MemoryBreakdown b = model.Estimate(l);
    CHECK(b.fits);
    CHECK(b.peak_gib() > 20);
  }
  // The FSDP recipe's degrees: dp 128, edp 32.
  const Layout fsdp = Parse("tp=2,pp=1,ep=8,etp=1,mbs=4,recompute=full,dispatcher=deepep,fsdp=1", in.job);
  CHECK(fsdp.dp == 128);
  CHECK(fsdp.edp == 32);
}
