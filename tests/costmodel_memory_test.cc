// Memory per rank (costmodel/memory.h). Each test states the arithmetic it
// relies on, then asserts the number that arithmetic implies; the
// derivations are in doc/cost-model-memory.md.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "costmodel/memory.h"
#include "fixtures.h"
#include "inputs/loader.h"
#include "planner/pipeline_split.h"
#include "shipped_model.h"

using namespace foldplan;
using foldplan::testing::MakeCluster;
using foldplan::testing::MakeJob;
using foldplan::testing::MakeMixtral;

namespace {

using foldplan::testing::ShippedModel;

Layout MemoryLayout(int tp, int cp, int dp, int pp, int ep, int etp, int mbs = 1, int vpp = 1) {
  Layout l = testing::FromDegrees(tp, cp, dp, pp, ep, etp);
  l.mbs = mbs;
  l.vpp = vpp;
  return l;
}

// A GPT-style model: GELU MLP of width 4h, multi-head attention, as
// Korthikanti et al. (arXiv 2205.05198) assume.
ModelSpec MakeGeluMha(int hidden, int heads) {
  ModelSpec m;
  m.name = "gelu-mha";
  m.layers = 8;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.head_dim = hidden / heads;
  m.vocab = 51200;
  m.ffn_hidden = 4 * hidden;
  m.activation = Activation::kGeLU;
  m.attention = AttentionKind::kMHA;
  return m;
}

}  // namespace

TEST_CASE("layer_params and embedding_params add up to total_params for every shipped model") {
  for (const char* name : {"mixtral-8x7b", "mixtral-8x22b", "qwen2-57b-a14b", "qwen3-30b-a3b",
                           "qwen3-235b-a22b", "deepseek-v3", "olmoe-1b-7b", "llama3-70b",
                           "gpt3-175b"}) {
    CAPTURE(name);
    const ModelSpec m = ShippedModel(name);
    int64_t sum = m.embedding_params().total();
    for (int i = 0; i < m.layers; ++i) sum += m.layer_params(m.layer_is_moe(i)).total();
    CHECK(sum == m.total_params());
  }
}

// mixtral-8x7b, 64 ranks: tp 2, cp 1, dp 8, pp 4 (8 layers each), ep 8,
// etp 1, edp 2 (2 x 1 x 8 = 8 x 1 x 2). Per layer (inputs_params_test.cc):
// attention 41,943,040 (TP-split), norms 8,192 and router 32,768
// (replicated), expert 176,160,768 (x 8 experts, split over ep x etp = 8).
//   stage 0 dense  = 8 x (41,943,040 / 2 + 8,192 + 32,768)
//                    + 32000 x 4096 / 2 (vocab-parallel input embedding)
//                  = 168,099,840 + 65,536,000 = 233,635,840
//   stage 0 expert = 8 layers x 8 experts x 176,160,768 / 8 = 1,409,286,144
//   total          = 1,642,921,984 elements
//   parameters     = 2 B x that = 3,285,843,968
//   gradients      = 4 B x that = 6,571,687,936
//   optimizer      = 12 B x (233,635,840 / (dp 8 x cp 1) + 1,409,286,144 / edp 2)
//                  = 12 x (29,204,480 + 704,643,072) = 8,806,170,624
//   stage 3 adds the final norm (4,096) and the output layer instead of the
//   input embedding (same size): dense 233,639,936;
//   parameters 3,285,852,160; optimizer 12 x (29,204,992 + 704,643,072)
//   = 8,806,176,768.
TEST_CASE("parameter, gradient and optimizer bytes of a hand-computed mixtral-8x7b layout") {
  const ModelSpec m = ShippedModel("mixtral-8x7b");
  const JobSpec job = MakeJob();
  const ClusterSpec cluster = MakeCluster(8);
  const MemoryModel model(m, job, cluster);
  const Layout l = MemoryLayout(2, 1, 8, 4, 8, 1);
  REQUIRE(l.edp == 2);

  const StageParams p0 = model.ParamsOnStage(l, 0);
  CHECK(p0.dense == 233'635'840.0);
  CHECK(p0.expert == 1'409'286'144.0);

  const MemoryBreakdown s0 = model.EstimateStage(l, 0);
  CHECK(s0.bytes_of(memory_term::kParameters) == 3'285'843'968.0);
  CHECK(s0.bytes_of(memory_term::kGradients) == 6'571'687'936.0);
  CHECK(s0.bytes_of(memory_term::kOptimizerStates) == 8'806'170'624.0);
  CHECK(s0.bytes_of(memory_term::kFp8WeightCopies) == 0);  // bf16 job

  const MemoryBreakdown s3 = model.EstimateStage(l, 3);
  CHECK(model.ParamsOnStage(l, 3).dense == 233'639'936.0);
  CHECK(s3.bytes_of(memory_term::kParameters) == 3'285'852'160.0);
  CHECK(s3.bytes_of(memory_term::kOptimizerStates) == 8'806'176'768.0);

  // Without a distributed optimizer the 12 B are not sharded.
  JobSpec plain = job;
  plain.distributed_optimizer = false;
  const MemoryModel unsharded(m, plain, cluster);
  CHECK(unsharded.EstimateStage(l, 0).bytes_of(memory_term::kOptimizerStates) ==
        12.0 * 1'642'921'984.0);
  CHECK(unsharded.EstimateStage(l, 0).bytes_of(memory_term::kOptimizerBuckets) == 0);

  // fp8 keeps the bf16 weights and adds 2 B per GEMM weight: every decoder
  // weight but the norms and router, i.e. all but 8 x (8,192 + 32,768) and
  // the embedding.
  Layout fp8 = l;
  fp8.precision = Precision::kFP8Tensorwise;
  const MemoryBreakdown f0 = MemoryModel(m, job, cluster).EstimateStage(fp8, 0);
  CHECK(f0.bytes_of(memory_term::kParameters) == 3'285'843'968.0);
  CHECK(f0.bytes_of(memory_term::kFp8WeightCopies) ==
        2.0 * (8 * 41'943'040.0 / 2 + 1'409'286'144.0));
}

TEST_CASE("a tied embedding is held by both the first and the last stage") {
  ModelSpec m = MakeMixtral();
  m.tied_embeddings = true;
  const JobSpec job = MakeJob();
  const MemoryModel model(m, job, MakeCluster(8));
  const double table = 32000.0 * 4096 / 2;  // vocab-parallel over tp 2
  const Layout l = MemoryLayout(2, 1, 8, 4, 8, 1);
  const double layers = model.ParamsOnStage(l, 1).dense;  // a middle stage: layers only
  CHECK(model.ParamsOnStage(l, 0).dense == layers + table);
  CHECK(model.ParamsOnStage(l, 3).dense == layers + table + 4096);
  // One stage: one copy.
  const Layout single = MemoryLayout(2, 1, 8, 1, 8, 1);
  CHECK(model.ParamsOnStage(single, 0).dense == 4 * layers + table + 4096);
}

// Korthikanti et al., section 4.1, bytes per layer for a GELU MHA layer with
// dropout and without flash attention (s sequence, b micro-batch, h hidden,
// a heads, t tensor-parallel size with sequence parallelism):
//   attention  2sbh (QKV input) + 4sbh (Q, K) + 2as^2b (softmax output)
//              + as^2b (its dropout mask) + 2as^2b (dropout output)
//              + 2sbh (V) + 2sbh (out-projection input) + sbh (dropout mask)
//              = 11sbh + 5as^2b
//   MLP        2sbh (fc1 input) + 8sbh (GELU input) + 8sbh (fc2 input)
//              + sbh (dropout mask) = 19sbh
//   norms      2 x 2sbh = 4sbh
//   total      sbh (34 + 5as/h), all divided by t with TP + SP.
// Selective recomputation drops the 5as^2b core: 34 sbh / t exactly.
TEST_CASE("a GELU MHA layer matches Korthikanti: 34 sbh / t selective, sbh (34 + 5as/h) / t") {
  const int h = 12288, a = 96, s = 2048, b = 2, t = 8;
  const ModelSpec m = MakeGeluMha(h, a);
  JobSpec job = MakeJob();
  job.seq_len = s;
  MemoryAssumptions korthikanti;
  korthikanti.flash_attention = false;
  korthikanti.dropout = true;
  const MemoryModel model(m, job, MakeCluster(1), korthikanti);
  const Layout l = MemoryLayout(t, 1, 1, 1, 1, t, b);

  const double sbh = double(s) * b * h;
  CHECK(model.LayerActivationBytes(l, false, Recompute::Selective()) == 34 * sbh / t);
  CHECK(model.LayerActivationBytes(l, false, Recompute::None()) ==
        sbh * (34 + 5.0 * a * s / h) / t);
  // Full recomputation keeps the layer input only: 2sbh / t.
  CHECK(model.LayerActivationBytes(l, false, Recompute::Full()) == 2 * sbh / t);

  // Without TP the same constants, undivided.
  const Layout no_tp = MemoryLayout(1, 1, 1, 1, 1, 1, b);
  CHECK(model.LayerActivationBytes(no_tp, false, Recompute::Selective()) == 34 * sbh);
}

// Flash attention keeps q, k, v and the output (already in the 34) plus
// fp32 softmax statistics, 4 B per head and query: 4 a s b / t. No s x s
// term: the activation grows linearly with s.
TEST_CASE("flash attention removes the s^2 term, leaving 4 a s b / t of softmax statistics") {
  const int h = 12288, a = 96, b = 2, t = 8;
  const ModelSpec m = MakeGeluMha(h, a);
  MemoryAssumptions flash;
  flash.flash_attention = true;
  flash.dropout = true;
  auto none_at = [&](int s) {
    JobSpec job = MakeJob();
    job.seq_len = s;
    const MemoryModel model(m, job, MakeCluster(1), flash);
    const Layout l = MemoryLayout(t, 1, 1, 1, 1, t, b);
    const double sbh = double(s) * b * h;
    CHECK(model.LayerActivationBytes(l, false, Recompute::Selective()) == 34 * sbh / t);
    return model.LayerActivationBytes(l, false, Recompute::None());
  };
  const double at_2k = none_at(2048);
  CHECK(at_2k == (34.0 * 2048 * b * h + 4.0 * a * 2048 * b) / t);
  CHECK(none_at(4096) == 2 * at_2k);  // linear in s
}

// Megatron's fused SwiGLU keeps its input (gate and up, 2F) and the fc2
// input (F); without dropout the dense SwiGLU GQA layer per token row is
//   2 B x (H norm + H QKV input + q a d + k a_kv d + v a_kv d + o a d
//          + H norm + H fc1 input + 2F + F)
// For the dense mixtral-like model (H 4096, 32 / 8 heads of 128, F 14336):
//   2 x (4096 x 4 + 4096 + 1024 + 1024 + 4096 + 3 x 14336) = 2 x 69,632
//   = 139,264 B per row, + 4 x 32 = 128 B of flash statistics without
//   recomputation. tp 2, cp 2, mbs 1, S 4096: T = 4096 / 4 = 1024 rows.
TEST_CASE("a SwiGLU GQA dense layer, derived per tensor") {
  const ModelSpec m = foldplan::testing::MakeDense();
  const JobSpec job = MakeJob();
  const MemoryModel model(m, job, MakeCluster(1));
  const Layout l = MemoryLayout(2, 2, 2, 1, 1, 2);
  CHECK(model.LayerActivationBytes(l, false, Recompute::Selective()) == 1024.0 * 139'264);
  CHECK(model.LayerActivationBytes(l, false, Recompute::None()) == 1024.0 * (139'264 + 128));
  CHECK(model.LayerActivationBytes(l, false, Recompute::Full()) == 1024.0 * 2 * 4096);
}

// An MoE layer of the mixtral-like model, tp 2, cp 1, ep 8, etp 1, mbs 1,
// S 4096, dropless with routing_imbalance 1.25: T = 4096 / 2 = 2048 rows.
// Megatron-Core applies the routing probabilities inside the experts'
// weighted SwiGLU, so the combine keeps nothing; each expert row keeps its
// fp32 probability instead (expert_probs_in_activation).
//   attention per row  2 x (2 x 4096 + 4096 + 1024 + 1024 + 4096) = 36,864
//   MoE per row        2 x 2 x 4096 (norm input, router input)
//                      + 4 x 8 (fp32 router scores) + 4 x 8 (fp32 aux-loss scores)
//                      + 1 x 8 (bool routing map, fused router) = 16,456
//   expert rows        etp x load x T x K = 1 x 1.25 x 2048 x 2 = 5,120
//   per expert row     2 x 4096 (fc1 input) + 2 x 2 x 14336 (SwiGLU input)
//                      + 4 (probability) + 2 x 14336 (fc2 input) = 94,212
//   selective          2048 x (36,864 + 16,456) + 5,120 x 94,212
//                      = 109,199,360 + 482,365,440 = 591,564,800
// With etp 2 the ETP all-gather doubles the rows (10,240) and halves the
// expert width: 10,240 x (8,192 + 57,344 / 2 + 4 + 28,672 / 2) = 524,328,960.
// The older Megatron placement (probabilities applied at unpermute) keeps
// the K = 2 expert outputs per token: + 2048 x 2 x 4096 x 2 B, and no
// probabilities: - 5,120 x 4.
TEST_CASE("an MoE layer, derived per tensor, with imbalance and ETP") {
  const ModelSpec m = MakeMixtral();
  JobSpec job = MakeJob();
  job.routing_imbalance = 1.25;
  const MemoryModel model(m, job, MakeCluster(1));
  const double attention_and_router = 109'199'360.0;
  CHECK(model.LayerActivationBytes(MemoryLayout(2, 1, 4, 1, 8, 1), true, Recompute::Selective()) ==
        591'564'800.0);
  CHECK(model.LayerActivationBytes(MemoryLayout(2, 1, 4, 1, 4, 2), true, Recompute::Selective()) ==
        attention_and_router + 524'328'960.0);
  // ep 1: every expert is local, no imbalance between ranks: 4,096 rows.
  CHECK(model.LayerActivationBytes(MemoryLayout(2, 1, 4, 1, 1, 1), true, Recompute::Selective()) ==
        attention_and_router + 4096.0 * 94'212);
  // A capacity factor pads every expert to CF x its mean share: 1.5 x 4,096 rows.
  job.capacity_factor = 1.5;
  const MemoryModel padded(m, job, MakeCluster(1));
  CHECK(padded.LayerActivationBytes(MemoryLayout(2, 1, 4, 1, 8, 1), true, Recompute::Selective()) ==
        attention_and_router + 6144.0 * 94'212);

  job.capacity_factor = 0;
  MemoryAssumptions old_megatron;
  old_megatron.expert_probs_in_activation = false;
  const MemoryModel unpermute_probs(m, job, MakeCluster(1), old_megatron);
  CHECK(unpermute_probs.LayerActivationBytes(MemoryLayout(2, 1, 4, 1, 8, 1), true,
                                             Recompute::Selective()) ==
        591'564'800.0 + 2048.0 * 2 * 4096 * 2 - 5120.0 * 4);
  // The unfused router keeps the top-k probabilities (fp32) and indices
  // (int64) instead of nothing more than the routing map: + 2048 x 2 x (4 + 8).
  job.moe_router_fusion = false;
  const MemoryModel unfused(m, job, MakeCluster(1));
  CHECK(unfused.LayerActivationBytes(MemoryLayout(2, 1, 4, 1, 8, 1), true, Recompute::Selective()) ==
        591'564'800.0 + 2048.0 * 2 * (4 + 8));
}

TEST_CASE("the breakdown: every term once, the peak is their sum, the worst stage is the max") {
  const ModelSpec m = ShippedModel("deepseek-v3");
  const JobSpec job = MakeJob();
  const ClusterSpec cluster = MakeCluster(64);
  const MemoryModel model(m, job, cluster);
  Layout l = MemoryLayout(2, 1, 32, 8, 64, 1);  // 512 ranks
  const MemoryBreakdown worst = model.Estimate(l);
  REQUIRE(worst.terms.size() == size_t(kMemoryTermCount));
  std::set<std::string> names;
  double sum = 0;
  for (const MemoryTerm& t : worst.terms) {
    names.insert(t.name);
    sum += t.bytes;
    CHECK(t.bytes >= 0);
    CHECK_FALSE(t.note.empty());
  }
  CHECK(names.size() == size_t(kMemoryTermCount));
  CHECK(worst.peak_bytes == doctest::Approx(sum));
  CHECK(worst.hbm_gib == cluster.gpu.hbm_gib);
  CHECK(worst.fits == (worst.peak_gib() <= cluster.gpu.hbm_gib));
  int at = -1;
  CHECK(model.PeakBytes(l, &at) == worst.peak_bytes);
  CHECK(at == worst.worst_stage);
  for (int p = 0; p < l.pp; ++p) {
    CHECK(model.EstimateStage(l, p).peak_bytes <= worst.peak_bytes);
  }
  CHECK(model.EstimateStage(l, worst.worst_stage).peak_bytes == worst.peak_bytes);
  // Explicit stage layers give the same answer as the derived split.
  auto split = SplitLayers(m.layers, l.pp, l.vpp);
  REQUIRE(split.ok());
  l.stage_layers = split.value();
  CHECK(model.Estimate(l).peak_bytes == worst.peak_bytes);

  // The CostContext entry point is the same model.
  CostContext ctx;
  ctx.model = &m;
  ctx.job = &job;
  ctx.cluster = &cluster;
  CHECK(EstimateMemory(l, ctx).peak_bytes == worst.peak_bytes);
}

TEST_CASE("deepseek-v3 counts dense and MoE layers per stage from first_k_dense") {
  // 61 layers over pp 4 given as stages=16/15/15/15: stage 0 holds layers
  // 0-15, of which 0-2 are dense, so 13 MoE layers; stage 1 holds 16-30, all
  // MoE. Each MoE layer has 256 / (ep 8 x etp 1) = 32 local experts of
  // 3 x 7168 x 2048 = 44,040,192 weights.
  const ModelSpec m = ShippedModel("deepseek-v3");
  const JobSpec model_job = MakeJob();
  const MemoryModel model(m, model_job, MakeCluster(4));
  Layout l = MemoryLayout(1, 1, 8, 4, 8, 1);
  l.stage_layers = {16, 15, 15, 15};
  l.explicit_stages = true;
  CHECK(model.ParamsOnStage(l, 0).expert == 13.0 * 32 * 44'040'192);
  CHECK(model.ParamsOnStage(l, 1).expert == 15.0 * 32 * 44'040'192);

  // Stage layers that do not cover the model (an illegal layout) are
  // replaced by Megatron's split rather than read past the last layer.
  Layout bad = l;
  bad.stage_layers = {20, 20, 20, 20};
  Layout derived = l;
  derived.stage_layers.clear();
  for (int p = 0; p < 4; ++p) {
    CHECK(model.ParamsOnStage(bad, p).expert == model.ParamsOnStage(derived, p).expert);
  }
}

// llama3-70b (dense: 80 layers, H 8192, 64 / 8 heads of 128, F 28672,
// vocab 128256), tp 8, pp 4, dp 4: no expert weights, no dispatch buffers;
// NCCL collectives are tp and dp x cp only.
TEST_CASE("a dense model has no MoE terms") {
  const ModelSpec m = ShippedModel("llama3-70b");
  const JobSpec model_job = MakeJob();
  const MemoryModel model(m, model_job, MakeCluster(16));
  const Layout l = MemoryLayout(8, 1, 4, 4, 1, 8);
  const MemoryBreakdown b = model.Estimate(l);
  CHECK(model.ParamsOnStage(l, 1).expert == 0);
  CHECK(b.bytes_of(memory_term::kDispatchBuffers) == 0);
  // Stage 1: 2 collectives x 16 x 9.1875 MiB + 2 pipeline neighbours x 2 x 4 MiB.
  const double mib = 1024.0 * 1024;
  CHECK(model.EstimateStage(l, 1).bytes_of(memory_term::kNcclBuffers) ==
        2 * 16 * 9.1875 * mib + 2 * 2 * 4 * mib);
  // Per-rank layer weights of a middle stage: 20 layers x (attention
  // (8192 x (8192 + 2 x 1024) + 8192 x 8192) + 3 x 8192 x 28672) / 8 + norms 2 x 8192.
  const double attention = 8192.0 * (8192 + 2 * 1024) + 8192.0 * 8192;
  const double mlp = 3.0 * 8192 * 28672;
  CHECK(model.ParamsOnStage(l, 1).dense == 20 * ((attention + mlp) / 8 + 2 * 8192));
  CHECK(b.fits);
}

// A big model on a small cluster does not fit; a small one does.
// deepseek-v3 on 8 H100s, tp 1 pp 1 ep 8: 58 MoE layers x 32 local experts
// x 44,040,192 = 81.7e9 expert weights per rank: 163 GB of bf16 weights alone.
TEST_CASE("deepseek-v3 on 8 H100s does not fit; olmoe-1b-7b does") {
  const ClusterSpec cluster = MakeCluster(1);
  const JobSpec job = MakeJob();
  const Layout l = MemoryLayout(1, 1, 8, 1, 8, 1);
  const ModelSpec big = ShippedModel("deepseek-v3");
  const MemoryBreakdown b = MemoryModel(big, job, cluster).Estimate(l);
  CHECK_FALSE(b.fits);
  CHECK(b.bytes_of(memory_term::kParameters) > 2 * 81e9);
  CHECK(b.peak_gib() > 79.6);

  const ModelSpec small = ShippedModel("olmoe-1b-7b");
  Layout s = l;
  s.recompute = Recompute::Selective();
  const MemoryBreakdown f = MemoryModel(small, job, cluster).Estimate(s);
  CHECK(f.fits);
  CHECK(f.peak_gib() < 79.6);
  CHECK(f.peak_gib() > 10);  // and not absurdly small
}

// Property: more ranks in a sharding group never raise a stage's per-rank
// parameter or optimizer bytes. Doubling tp, cp or dp adds ranks to the
// stage (edp grows with them); doubling ep or etp moves ranks from edp;
// doubling pp halves each stage's layers (the first and last stages keep
// a subset of their layers and their embedding / output layer).
TEST_CASE("property: a bigger sharding group never raises per-rank parameter or optimizer bytes") {
  std::mt19937 rng(20240611);
  auto pick = [&](std::initializer_list<int> v) {
    std::uniform_int_distribution<size_t> d(0, v.size() - 1);
    return *(v.begin() + d(rng));
  };
  const std::vector<ModelSpec> models = {ShippedModel("mixtral-8x7b"), ShippedModel("deepseek-v3"),
                                         ShippedModel("qwen3-30b-a3b")};
  JobSpec job = MakeJob();
  job.global_batch = 4096;
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const ModelSpec& m = models[size_t(trial) % models.size()];
    job.distributed_optimizer = trial % 5 != 0;
    const MemoryModel model(m, job, MakeCluster(512));
    const int tp = pick({1, 2, 4}), cp = pick({1, 2}), dp = pick({1, 2, 4, 8});
    const int pp = pick({1, 2, 4}), etp = pick({1, 2}), ep = pick({1, 2, 4, 8});
    if ((tp * cp * dp) % (ep * etp) != 0) continue;
    const Layout base = MemoryLayout(tp, cp, dp, pp, ep, etp);
    auto stage_bytes = [&](const Layout& l, int stage, const char* term) {
      return model.EstimateStage(l, stage).bytes_of(term);
    };
    auto no_worse = [&](const Layout& bigger, const char* what) {
      CAPTURE(what);
      CAPTURE(FormatLayout(base));
      for (int p = 0; p < base.pp; ++p) {
        for (const char* term : {memory_term::kParameters, memory_term::kOptimizerStates}) {
          CAPTURE(term);
          // (1 + 1e-12): ep x etp x edp products reassociate in floating point.
          CHECK(stage_bytes(bigger, p, term) <= stage_bytes(base, p, term) * (1 + 1e-12));
        }
      }
      ++checked;
    };
    no_worse(MemoryLayout(2 * tp, cp, dp, pp, ep, etp), "tp x2");
    no_worse(MemoryLayout(tp, 2 * cp, dp, pp, ep, etp), "cp x2");
    no_worse(MemoryLayout(tp, cp, 2 * dp, pp, ep, etp), "dp x2");
    if (base.edp % 2 == 0) {
      no_worse(MemoryLayout(tp, cp, dp, pp, 2 * ep, etp), "ep x2");
      no_worse(MemoryLayout(tp, cp, dp, pp, ep, 2 * etp), "etp x2");
    }
    // pp x2: compare the first and the last stage.
    const Layout deeper = MemoryLayout(tp, cp, dp, 2 * pp, ep, etp);
    for (const char* term : {memory_term::kParameters, memory_term::kOptimizerStates}) {
      CHECK(stage_bytes(deeper, 0, term) <= stage_bytes(base, 0, term));
      CHECK(stage_bytes(deeper, deeper.pp - 1, term) <= stage_bytes(base, base.pp - 1, term));
    }
  }
  CHECK(checked > 500);
}

// Property: recomputation only ever lowers what a layer keeps:
// full (the input, 2 T H) <= selective (no attention core) <= none.
TEST_CASE("property: full <= selective <= none activations, per layer and per stage") {
  std::mt19937 rng(7);
  auto pick = [&](std::initializer_list<int> v) {
    std::uniform_int_distribution<size_t> d(0, v.size() - 1);
    return *(v.begin() + d(rng));
  };
  const std::vector<ModelSpec> models = {ShippedModel("mixtral-8x7b"), ShippedModel("deepseek-v3"),
                                         ShippedModel("llama3-70b"), ShippedModel("gpt3-175b"),
                                         MakeGeluMha(4096, 32)};
  for (int trial = 0; trial < 300; ++trial) {
    const ModelSpec& m = models[size_t(trial) % models.size()];
    JobSpec job = MakeJob();
    job.seq_len = pick({1024, 4096, 32768});
    job.routing_imbalance = 1.0 + 0.1 * pick({0, 1, 2, 5});
    MemoryAssumptions a;
    a.flash_attention = trial % 3 != 0;
    a.dropout = trial % 4 == 0;
    const MemoryModel model(m, job, MakeCluster(64), a);
    const bool moe_model = m.is_moe();
    const int tp = pick({1, 2, 8}), cp = pick({1, 2, 4}), dp = pick({1, 2, 4});
    const int ep = moe_model ? pick({1, 2, 4, 8}) : 1;
    const int etp = moe_model ? pick({1, 2}) : tp;
    if ((tp * cp * dp) % (ep * etp) != 0) continue;
    Layout l = MemoryLayout(tp, cp, dp, pick({1, 2, 4}), ep, etp, pick({1, 2}));
    CAPTURE(FormatLayout(l));
    for (bool moe_layer : {false, true}) {
      if (moe_layer && !moe_model) continue;
      const double full = model.LayerActivationBytes(l, moe_layer, Recompute::Full());
      const double selective = model.LayerActivationBytes(l, moe_layer, Recompute::Selective());
      const double none = model.LayerActivationBytes(l, moe_layer, Recompute::None());
      CHECK(full > 0);
      CHECK(full <= selective);
      CHECK(selective <= none);
    }
    double previous = -1;
    for (Recompute r : {Recompute::Full(), Recompute::Selective(), Recompute::None()}) {
      l.recompute = r;
      const double act = model.EstimateStage(l, 0).bytes_of(memory_term::kActivations);
      CHECK(act >= previous);
      previous = act;
    }
  }
}

TEST_CASE("named buffers: dispatch, NCCL, logits, context and fragmentation") {
  const ModelSpec m = MakeMixtral();
  JobSpec job = MakeJob();
  job.routing_imbalance = 1.25;
  const MemoryModel model(m, job, MakeCluster(8));
  const Layout l = MemoryLayout(2, 1, 4, 2, 8, 1);  // 16 ranks, T = 2048
  const MemoryBreakdown first = model.EstimateStage(l, 0);
  const MemoryBreakdown last = model.EstimateStage(l, 1);

  // Dispatch: send T K H + receive 1.25 T K H, bf16: 2.25 x 2048 x 2 x 4096 x 2.
  CHECK(first.bytes_of(memory_term::kDispatchBuffers) == 2.25 * 2048 * 2 * 4096 * 2);
  // Logits on the last stage only: fp32 4096 x 32000 / 2 x 4 B, + final-norm
  // and output-layer inputs 2 x 2048 x 4096 x 2 B.
  CHECK(first.bytes_of(memory_term::kOutputLogits) == 0);
  CHECK(last.bytes_of(memory_term::kOutputLogits) ==
        4096.0 * 16000 * 4 + 2.0 * 2048 * 4096 * 2);
  // Token and position ids on the first stage only: 2 in flight x 2 x 8 B x 4096.
  CHECK(first.bytes_of(memory_term::kEmbeddingActivations) == 2.0 * 2 * 8 * 4096);
  CHECK(last.bytes_of(memory_term::kEmbeddingActivations) == 0);
  // NCCL, stage 0: collectives tp (2), dp x cp (4), edp (1: none), etp (1:
  // none), tp x ep (16): 3 x 16 channels x 9.1875 MiB; p2p: ep 8 -> 7 peers
  // + 1 pipeline neighbour = 8 peers x 2 channels x 4 MiB.
  const double mib = 1024.0 * 1024;
  CHECK(first.bytes_of(memory_term::kNcclBuffers) == 3 * 16 * 9.1875 * mib + 8 * 2 * 4 * mib);
  CHECK(first.bytes_of(memory_term::kCudaContext) == 0.6 * 1024 * mib);
  // Fragmentation: 10% of the short-lived terms.
  const double short_lived = first.bytes_of(memory_term::kActivations) +
                             first.bytes_of(memory_term::kRecomputeWorkingSet) +
                             first.bytes_of(memory_term::kEmbeddingActivations) +
                             first.bytes_of(memory_term::kOutputLogits) +
                             first.bytes_of(memory_term::kDispatchBuffers);
  CHECK(first.bytes_of(memory_term::kFragmentation) == doctest::Approx(0.10 * short_lived));

  // Full recomputation: one layer's full activations live while recomputed.
  Layout full = l;
  full.recompute = Recompute::Full();
  CHECK(model.EstimateStage(full, 0).bytes_of(memory_term::kRecomputeWorkingSet) ==
        model.LayerActivationBytes(full, true, Recompute::None()));
}
