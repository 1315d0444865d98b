// Megatron-FSDP (ZeRO-3) in the memory model: weights, gradients and
// optimizer states sharded over the gradient-reduction groups, plus the
// gathered working set and the unsharded gradients of the units in flight.
// Arithmetic first; derivations in doc/cost-model-memory.md ("FSDP").
#include <doctest/doctest.h>

#include "costmodel/memory.h"
#include "fixtures.h"

using namespace foldplan;
using foldplan::testing::MakeCluster;
using foldplan::testing::MakeJob;
using foldplan::testing::MakeMixtral;

// Mixtral-like, tp 2, pp 1, ep 8, dp 8 (16 ranks, edp 2). Per rank:
//   dense  = 32 layers x (41,943,040 / 2 + 8,192 + 32,768) + input embedding
//            32000 x 4096 / 2 + output layer 32000 x 4096 / 2 + final norm 4096
//          = 672,399,360 + 65,536,000 x 2 + 4,096 = 803,475,456
//   expert = 32 x 8 x 176,160,768 / 8 = 5,637,144,576
//   shards = 803,475,456 / (dp 8 x cp 1) + 5,637,144,576 / edp 2
//          = 100,434,432 + 2,818,572,288 = 2,919,006,720
//   parameters 2 B, gradients 4 B, optimizer 12 B x shards
// Units: an MoE layer, 20,971,520 + 40,960 + 176,160,768 = 197,173,248,
// is larger than a table (65,536,000); the two largest are two layers:
//   gathered parameters 2 B x 2 x 197,173,248 = 788,692,992
//   unsharded gradients 4 B x 2 x 197,173,248 = 1,577,385,984
TEST_CASE("FSDP shards weights, gradients and optimizer states and gathers two units") {
  const ModelSpec m = MakeMixtral();
  const JobSpec job = MakeJob();
  const MemoryModel model(m, job, MakeCluster(2));
  Layout l = testing::FromDegrees(2, 1, 8, 1, 8);
  REQUIRE(l.edp == 2);
  const StageParams p = model.ParamsOnStage(l, 0);
  CHECK(p.dense == 803'475'456.0);
  CHECK(p.expert == 5'637'144'576.0);

  l.fsdp = true;
  const MemoryBreakdown b = model.EstimateStage(l, 0);
  const double shards = 2'919'006'720.0;
  CHECK(b.bytes_of(memory_term::kParameters) == 2 * shards);
  CHECK(b.bytes_of(memory_term::kGradients) == 4 * shards);
  CHECK(b.bytes_of(memory_term::kOptimizerStates) == 12 * shards);
  CHECK(b.bytes_of(memory_term::kFsdpGatheredParameters) == 788'692'992.0);
  CHECK(b.bytes_of(memory_term::kFsdpUnshardedGradients) == 1'577'385'984.0);
  CHECK(b.bytes_of(memory_term::kOptimizerBuckets) == 0);

  // Without FSDP: the distributed optimizer shards only the optimizer states.
  l.fsdp = false;
  const MemoryBreakdown d = model.EstimateStage(l, 0);
  CHECK(d.bytes_of(memory_term::kParameters) == 2 * (803'475'456.0 + 5'637'144'576.0));
  CHECK(d.bytes_of(memory_term::kOptimizerStates) == 12 * shards);
  CHECK(d.bytes_of(memory_term::kFsdpGatheredParameters) == 0);
  CHECK(d.bytes_of(memory_term::kFsdpUnshardedGradients) == 0);

  // FSDP shards the optimizer states whether or not the job asks for the
  // distributed optimizer (which is what it replaces).
  JobSpec plain = job;
  plain.distributed_optimizer = false;
  l.fsdp = true;
  CHECK(MemoryModel(m, plain, MakeCluster(2)).EstimateStage(l, 0).bytes_of(
            memory_term::kOptimizerStates) == 12 * shards);

  // Under FP8 the weight copies exist for the gathered units only:
  // 2 B x 2 x (20,971,520 + 176,160,768) GEMM weights.
  l.precision = Precision::kFP8Tensorwise;
  CHECK(model.EstimateStage(l, 0).bytes_of(memory_term::kFp8WeightCopies) ==
        2 * 2 * (20'971'520.0 + 176'160'768.0));
}

// A dense model's largest units are its tables when the vocabulary is big:
// llama3-70b-like tp 8, layers (8192 x 10240 + 8192 x 8192 + 3 x 8192 x
// 28672) / 8 + 2 x 8192 = 106,971,136 vs the table 128256 x 8192 / 8 =
// 131,334,144: the two units gathered at once on the single stage are the
// input and output tables.
TEST_CASE("FSDP's gathered working set is the largest units the stage holds, tables included") {
  ModelSpec m;
  m.name = "llama-like";
  m.layers = 80;
  m.hidden = 8192;
  m.heads = 64;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.vocab = 128256;
  m.ffn_hidden = 28672;
  const JobSpec model_job = MakeJob();  // outlives the model, which points to it
  const MemoryModel model(m, model_job, MakeCluster(2));
  Layout l = testing::FromDegrees(8, 1, 2, 1, 1);
  l.etp = 8;
  l.edp = 2;
  l.fsdp = true;
  const MemoryBreakdown b = model.EstimateStage(l, 0);
  CHECK(b.bytes_of(memory_term::kFsdpGatheredParameters) == 2 * 2 * 131'334'144.0);
  // One unit at a time (no prefetch): the single largest.
  MemoryAssumptions one;
  one.fsdp_gathered_units = 1;
  one.fsdp_gradient_units = 1;
  const MemoryBreakdown c = MemoryModel(m, MakeJob(), MakeCluster(2), one).EstimateStage(l, 0);
  CHECK(c.bytes_of(memory_term::kFsdpGatheredParameters) == 2 * 131'334'144.0);
  CHECK(c.bytes_of(memory_term::kFsdpUnshardedGradients) == 4 * 131'334'144.0);
}
