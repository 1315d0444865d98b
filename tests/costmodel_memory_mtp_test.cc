// MTP modules in the memory model: the stage holding them (PipelineRank::
// mtp_layers) keeps their parameters, gradients and optimizer states, a
// copy of the input embedding, their activations and their heads' logits.
// Arithmetic first; derivations in doc/cost-model-memory.md ("MTP").
#include <doctest/doctest.h>

#include "costmodel/memory.h"
#include "fixtures.h"
#include "inputs/loader.h"

using namespace foldplan;
using foldplan::testing::MakeCluster;
using foldplan::testing::MakeJob;
using foldplan::testing::MakeMixtral;

// Mixtral-like (every layer MoE, so the MTP layer is MoE; H 4096, vocab
// 32000, untied), tp 2, pp 2, ep 8, dp 8: edp 2, T = 2048 rows. One MTP
// layer on the last stage adds, per rank:
//   dense   one MoE layer's 41,943,040 / 2 + 8,192 + 32,768 = 21,012,480
//           + eh_proj 2 x 4096 x 4096 / 2 = 16,777,216 + 3 norms 12,288
//           + the MTP's input-embedding copy 32000 x 4096 / 2 = 65,536,000
//           = 103,337,984
//   expert  8 x 176,160,768 / 8 = 176,160,768
// activations, one micro-batch (the MTP sits in the loss's chunk, whose
// backward follows each forward): one MoE layer + per row enorm input H,
// eh_proj input 2H, final-norm input H, head input H, all bf16:
// 2 x 5 x 4096 = 40,960 B x 2048 rows = 83,886,080;
// logits: fp32 4096 x 32000 / 2 x 4 B = 262,144,000.
TEST_CASE("an MTP layer on the last stage: its parameters, embedding copy, activations, logits") {
  const ModelSpec plain = MakeMixtral();
  ModelSpec m = plain;
  m.mtp_layers = 1;
  const JobSpec job = MakeJob();
  const MemoryModel with(m, job, MakeCluster(4));
  const MemoryModel without(plain, job, MakeCluster(4));
  const Layout l = testing::FromDegrees(2, 1, 8, 2, 8);
  const PipelineDescription pipeline = DescribePipeline(l, m);
  REQUIRE(pipeline.ranks[1].mtp_layers == 1);
  REQUIRE(pipeline.ranks[0].mtp_layers == 0);

  const StageParams a = with.ParamsOnStage(l, pipeline, 1);
  const StageParams b = without.ParamsOnStage(l, 1);
  CHECK(a.dense - b.dense == 103'337'984.0);
  CHECK(a.expert - b.expert == 176'160'768.0);
  CHECK(a.gemm - b.gemm == 21'012'480.0 - 8'192 - 32'768 + 16'777'216.0 + 176'160'768.0);
  CHECK(with.ParamsOnStage(l, pipeline, 0).total() == without.ParamsOnStage(l, 0).total());

  const MemoryBreakdown last = with.EstimateStage(l, 1);
  const MemoryBreakdown before = without.EstimateStage(l, 1);
  CHECK(last.bytes_of(memory_term::kParameters) - before.bytes_of(memory_term::kParameters) ==
        2 * (103'337'984.0 + 176'160'768.0));
  CHECK(last.bytes_of(memory_term::kGradients) - before.bytes_of(memory_term::kGradients) ==
        4 * (103'337'984.0 + 176'160'768.0));
  CHECK(last.bytes_of(memory_term::kOptimizerStates) -
            before.bytes_of(memory_term::kOptimizerStates) ==
        doctest::Approx(12 * (103'337'984.0 / 8 + 176'160'768.0 / 2)));
  CHECK(last.bytes_of(memory_term::kMtpActivations) ==
        with.LayerActivationBytes(l, true, l.recompute) + 83'886'080.0);
  CHECK(last.bytes_of(memory_term::kMtpLogits) == 262'144'000.0);
  CHECK(last.bytes_of(memory_term::kActivations) == before.bytes_of(memory_term::kActivations));
  // The embedding group (first stage <-> MTP stage) is one more NCCL
  // collective communicator on both: 16 channels x 9.1875 MiB.
  const double communicator = 16 * 9.1875 * 1024 * 1024;
  CHECK(last.bytes_of(memory_term::kNcclBuffers) - before.bytes_of(memory_term::kNcclBuffers) ==
        communicator);
  CHECK(with.EstimateStage(l, 0).bytes_of(memory_term::kNcclBuffers) -
            without.EstimateStage(l, 0).bytes_of(memory_term::kNcclBuffers) ==
        communicator);
  CHECK(with.EstimateStage(l, 0).bytes_of(memory_term::kMtpActivations) == 0);
}

// With one pipeline stage the MTP layer reuses the stage's own embedding:
// no copy, no embedding group. DeepSeek-V3's MTP layer is MoE (its last
// layer's kind): 256 / ep 64 = 4 local experts of 44,040,192 weights.
TEST_CASE("an MTP layer on a single stage shares the embedding; deepseek-v3's MTP is an MoE layer") {
  ModelSpec m = MakeMixtral();
  m.mtp_layers = 1;
  const JobSpec model_job = MakeJob();  // outlives the model, which points to it
  const MemoryModel model(m, model_job, MakeCluster(2));
  const Layout single = testing::FromDegrees(2, 1, 8, 1, 8);
  ModelSpec plain = MakeMixtral();
  const JobSpec without_job = MakeJob();  // outlives the model, which points to it
  const MemoryModel without(plain, without_job, MakeCluster(2));
  CHECK(model.ParamsOnStage(single, 0).dense - without.ParamsOnStage(single, 0).dense ==
        21'012'480.0 + 16'777'216.0 + 12'288);

  auto ds = LoadModel("deepseek-v3");
  REQUIRE(ds.ok());
  REQUIRE(ds.value().mtp_layers == 1);
  const JobSpec dsv3_job = MakeJob();  // outlives the model, which points to it
  const MemoryModel dsv3(ds.value(), dsv3_job, MakeCluster(64));
  const Layout l = testing::FromDegrees(1, 1, 64, 8, 64);
  const PipelineDescription pipeline = DescribePipeline(l, ds.value());
  const PipelineRank last = pipeline.ranks[7];
  REQUIRE(last.mtp_layers == 1);
  CHECK(dsv3.ParamsOnStage(l, pipeline, 7).expert == (last.moe_layers + 1) * 4 * 44'040'192.0);
}
