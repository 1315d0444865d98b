// Recompute modules (Megatron --recompute-modules): what each drops from a
// layer's stored activations and what backward rebuilds at a time (the
// recompute working set). Each test states the per-tensor arithmetic, then
// asserts the number it implies; doc/cost-model-memory.md derives it.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "costmodel/memory.h"
#include "fixtures.h"
#include "inputs/loader.h"
#include "shipped_model.h"

using namespace foldplan;
using foldplan::testing::MakeCluster;
using foldplan::testing::MakeJob;

namespace {

using foldplan::testing::ShippedModel;

Layout ModulesLayout(int tp, int dp, int pp, int ep, int mbs = 1) {
  Layout l = testing::FromDegrees(tp, 1, dp, pp, ep);
  l.mbs = mbs;
  return l;
}

Recompute Set(std::initializer_list<RecomputeModule> modules) {
  Recompute r;
  for (RecomputeModule m : modules) r = r.With(m);
  return r;
}

}  // namespace

// qwen3-235b-a22b (GQA 64 / 4 heads of 128, q/k norms, H 4096, 128 experts
// of width 1536, top 8), tp 2, ep 32, S 4096, mbs 1, forced balance
// (routing_imbalance 1): T = 2048 rows, R = T x K = 16,384 expert rows.
// Per row, bf16 (2 B):
//   attention  input-norm input H, its output H (linear_qkv's input: the
//              norm is fused into TELayerNormColumnParallelLinear), q 8192,
//              k 512, v 512, q/k-norm inputs 8192 + 512, attention output
//              8192: 2 x 34,304 = 68,608; + fp32 log-sum-exp 4 x 64 = 256
//   MoE        pre-MLP norm input H + its output H: 16,384; router: fp32
//              scores and aux-loss scores 2 x 4 x 128 + bool routing map
//              128 = 1,152
//   expert row fc1 input 2 x 4096 + SwiGLU input 2 x 3072 + fp32
//              probability 4 + fc2 input 2 x 1536 = 17,412
//   none       2048 x (68,864 + 17,536) + 16,384 x 17,412
//              = 176,947,200 + 285,278,208 = 462,225,408
TEST_CASE("recompute modules of a qwen3 GQA MoE layer drop the tensors Megatron discards") {
  const ModelSpec m = ShippedModel("qwen3-235b-a22b");
  JobSpec job = MakeJob();
  job.routing_imbalance = 1.0;
  const MemoryModel model(m, job, MakeCluster(32));
  const Layout l = ModulesLayout(2, 128, 1, 32);
  REQUIRE(l.edp == 8);
  auto stored = [&](Recompute r) { return model.LayerActivationBytes(l, true, r); };
  auto rebuilt = [&](Recompute r) { return model.LayerRecomputeBytes(l, true, r); };
  const double none = 462'225'408.0;
  CHECK(stored(Recompute::None()) == none);
  CHECK(rebuilt(Recompute::None()) == 0);

  // moe_act drops the activation's output, the fc2 input, R x 1536 x 2 B
  // = 50,331,648, and keeps its input; backward rebuilds that one tensor.
  const double fc2_inputs = 16'384.0 * 1536 * 2;
  CHECK(stored(Set({RecomputeModule::kMoeAct})) == none - fc2_inputs);
  CHECK(rebuilt(Set({RecomputeModule::kMoeAct})) == fc2_inputs);

  // layernorm: the input norm is fused into linear_qkv (an IdentityOp
  // norm module, which Megatron does not recompute); the MoE's pre-MLP
  // norm is a separate TENorm: its output, 2048 x 4096 x 2 B = 16,777,216.
  const double norm_output = 2048.0 * 4096 * 2;
  CHECK(stored(Set({RecomputeModule::kLayernorm})) == none - norm_output);
  CHECK(rebuilt(Set({RecomputeModule::kLayernorm})) == norm_output);

  // The published recipe's layernorm + moe_act: both dropped; the norm
  // output lives through the whole MoE backward, so both are rebuilt at
  // once: 16,777,216 + 50,331,648 = 67,108,864.
  const Recompute recipe = Set({RecomputeModule::kLayernorm, RecomputeModule::kMoeAct});
  CHECK(stored(recipe) == 395'116'544.0);
  CHECK(rebuilt(recipe) == 67'108'864.0);

  // moe keeps only the MoE layer's input (the norm output) beside its
  // norm input: 2048 x (68,864 + 16,384) = 174,587,904; backward rebuilds
  // the block: 2048 x 1,152 + 16,384 x 17,412 = 287,637,504.
  CHECK(stored(Set({RecomputeModule::kMoe})) == 174'587'904.0);
  CHECK(rebuilt(Set({RecomputeModule::kMoe})) == 287'637'504.0);

  // core_attn drops the fp32 log-sum-exp (2048 x 256); backward rebuilds it
  // and the core's output (2048 x 8192 x 2 B): 2048 x 16,640 = 34,078,720.
  CHECK(stored(Recompute::Selective()) == none - 2048.0 * 256);
  CHECK(rebuilt(Recompute::Selective()) == 34'078'720.0);

  // mla_up_proj, mlp and shared_experts have nothing to drop here (GQA,
  // an MoE layer, no shared experts).
  CHECK(stored(Set({RecomputeModule::kMlaUpProj, RecomputeModule::kMlp,
                    RecomputeModule::kSharedExperts})) == none);

  // full: the layer input only, 2048 x 4096 x 2 B; rebuilds the whole layer.
  CHECK(stored(Recompute::Full()) == norm_output);
  CHECK(rebuilt(Recompute::Full()) == none);

  // With every norm a separate module, layernorm also drops the input
  // norm's output (the QKV input): another 16,777,216.
  MemoryAssumptions unfused;
  unfused.norms_fused_into_linear = false;
  const MemoryModel separate(m, job, MakeCluster(32), unfused);
  CHECK(separate.LayerActivationBytes(l, true, recipe) == 395'116'544.0 - norm_output);
  // ... rebuilt during attention's backward, apart from the MoE's set.
  CHECK(separate.LayerRecomputeBytes(l, true, recipe) == 67'108'864.0);
}

// deepseek-v3 (MLA: 128 heads, q/k head 192 = 128 + 64, v head 128,
// q_lora 1536, kv_lora 512; H 7168; layers 0-2 dense of width 18432; one
// shared expert of width 2048), tp 2, S 4096: T = 2048 rows. Per row, 2 B:
//   mla_up_proj drops the latent norms' outputs (the up-projections'
//     inputs) 1536 + 512 and q 128 x 192, k 128 x 192, v 128 x 128:
//     2 x (2,048 + 24,576 + 24,576 + 16,384) = 135,168, and rebuilds them.
//   layernorm drops the input norm's output (MLA's input norm is a separate
//     TENorm, read by both down-projections) 2 x 7168 = 14,336, and in MoE
//     layers the pre-MLP norm's as well: 2 x 14,336. Rebuilt one sub-layer
//     at a time: 14,336.
//   mlp (dense layers) drops fc1's input (the fused pre-MLP norm's output)
//     7168 and the inner tensors 2 x 18432 + 18432: 2 x 62,464 = 124,928,
//     and rebuilds them.
//   shared_experts drops the shared expert's inner tensors
//     2 x (2 x 2048 + 2048) = 12,288, and rebuilds them.
TEST_CASE("recompute modules of deepseek-v3's MLA, dense MLP and shared experts") {
  const ModelSpec m = ShippedModel("deepseek-v3");
  JobSpec job = MakeJob();
  job.routing_imbalance = 1.0;
  const MemoryModel model(m, job, MakeCluster(32));
  const Layout l = ModulesLayout(2, 128, 1, 32);
  const double rows = 2048;
  for (bool moe : {false, true}) {
    CAPTURE(moe);
    const double none = model.LayerActivationBytes(l, moe, Recompute::None());
    auto stored = [&](Recompute r) { return model.LayerActivationBytes(l, moe, r); };
    auto rebuilt = [&](Recompute r) { return model.LayerRecomputeBytes(l, moe, r); };
    CHECK(stored(Set({RecomputeModule::kMlaUpProj})) == none - rows * 135'168);
    CHECK(rebuilt(Set({RecomputeModule::kMlaUpProj})) == rows * 135'168);
    const double norms = moe ? 2 * 14'336 : 14'336;  // the dense pre-MLP norm is fused into fc1
    CHECK(stored(Set({RecomputeModule::kLayernorm})) == none - rows * norms);
    CHECK(rebuilt(Set({RecomputeModule::kLayernorm})) == rows * 14'336);
    // Attention's rebuilt set and the MLP's are not alive together: the
    // larger is the working set.
    const Recompute both = Set({RecomputeModule::kLayernorm, RecomputeModule::kMlaUpProj});
    CHECK(rebuilt(both) == rows * (14'336 + 135'168));
  }
  CHECK(model.LayerActivationBytes(l, false, Set({RecomputeModule::kMlp})) ==
        model.LayerActivationBytes(l, false, Recompute::None()) - rows * 124'928);
  CHECK(model.LayerRecomputeBytes(l, false, Set({RecomputeModule::kMlp})) == rows * 124'928);
  CHECK(model.LayerActivationBytes(l, true, Set({RecomputeModule::kSharedExperts})) ==
        model.LayerActivationBytes(l, true, Recompute::None()) - rows * 12'288);
  CHECK(model.LayerRecomputeBytes(l, true, Set({RecomputeModule::kSharedExperts})) ==
        rows * 12'288);
  // mlp recomputes dense MLPs only; moe_act and shared_experts MoE layers only.
  CHECK(model.LayerActivationBytes(l, true, Set({RecomputeModule::kMlp})) ==
        model.LayerActivationBytes(l, true, Recompute::None()));
  CHECK(model.LayerActivationBytes(l, false, Set({RecomputeModule::kMoeAct,
                                                  RecomputeModule::kSharedExperts,
                                                  RecomputeModule::kMoe})) ==
        model.LayerActivationBytes(l, false, Recompute::None()));
}

// The stage's working set is one layer's at a time, of the larger kind it
// holds: deepseek-v3's first stage holds dense and MoE layers.
TEST_CASE("the recompute working set is the largest rebuilt set of one layer on the stage") {
  const ModelSpec m = ShippedModel("deepseek-v3");
  JobSpec job = MakeJob();
  job.global_batch = 256;
  const MemoryModel model(m, job, MakeCluster(32));
  Layout l = ModulesLayout(2, 16, 8, 32);
  l.recompute = Set({RecomputeModule::kMlp, RecomputeModule::kMoeAct});
  const MemoryBreakdown first = model.EstimateStage(l, 0);  // the 3 dense layers and MoE ones
  CHECK(first.bytes_of(memory_term::kRecomputeWorkingSet) ==
        std::max(model.LayerRecomputeBytes(l, false, l.recompute),
                 model.LayerRecomputeBytes(l, true, l.recompute)));
  const MemoryBreakdown middle = model.EstimateStage(l, 3);  // MoE layers only
  CHECK(middle.bytes_of(memory_term::kRecomputeWorkingSet) ==
        model.LayerRecomputeBytes(l, true, l.recompute));
}

// Property: recomputing one more module never raises what a layer keeps,
// for any model, precision and layout; and full keeps the least.
TEST_CASE("property: adding a recompute module never raises a layer's stored activations") {
  std::mt19937 rng(99);
  auto pick = [&](std::initializer_list<int> v) {
    std::uniform_int_distribution<size_t> d(0, v.size() - 1);
    return *(v.begin() + d(rng));
  };
  const std::vector<ModelSpec> models = {ShippedModel("qwen3-235b-a22b"), ShippedModel("deepseek-v3"),
                                         ShippedModel("mixtral-8x7b"), ShippedModel("llama3-70b")};
  const Precision precisions[] = {Precision::kBF16, Precision::kFP8Tensorwise,
                                  Precision::kFP8Blockwise, Precision::kMXFP8};
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const ModelSpec& m = models[size_t(trial) % models.size()];
    JobSpec job = MakeJob();
    job.routing_imbalance = 1.0 + 0.1 * pick({0, 2, 5});
    MemoryAssumptions a;
    a.norms_fused_into_linear = trial % 3 != 0;
    a.flash_attention = trial % 5 != 0;
    const MemoryModel model(m, job, MakeCluster(64), a);
    Layout l = ModulesLayout(pick({1, 2, 4}), 8, 1, m.is_moe() ? pick({1, 2, 4, 8}) : 1, pick({1, 2}));
    l.precision = precisions[trial % 4];
    const uint32_t base = static_cast<uint32_t>(rng()) & ((1u << kRecomputeModuleCount) - 1);
    const RecomputeModule added = RecomputeModule(pick({0, 1, 2, 3, 4, 5, 6}));
    const Recompute before = Recompute::Modules(base);
    const Recompute after = before.With(added);
    CAPTURE(m.name);
    CAPTURE(Name(before));
    CAPTURE(Name(after));
    const std::string precision = Name(l.precision);
    CAPTURE(precision);
    for (bool moe : {false, true}) {
      if (moe && !m.is_moe()) continue;
      if (!moe && m.ffn_hidden == 0) continue;  // every layer MoE: no dense layer to check
      const double b = model.LayerActivationBytes(l, moe, before);
      CHECK(model.LayerActivationBytes(l, moe, after) <= b);
      CHECK(model.LayerActivationBytes(l, moe, Recompute::Full()) <= b);
      CHECK(model.LayerRecomputeBytes(l, moe, after) >= 0);
      ++checked;
    }
  }
  CHECK(checked > 300);
}
