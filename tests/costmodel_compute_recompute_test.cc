// Recompute modules (Megatron's --recompute-modules) in the compute model:
// recompute_s is the forward time of the union of the recomputed modules'
// parts, each counted once; recompute_flops their matmul FLOPs, the same
// rule as flops.h RecomputeFlops. Each case states which parts a module
// covers, then asserts the sum.
#include <doctest/doctest.h>

#include <string>

#include "costmodel/stage_work.h"
#include "costmodel_compute_fixtures.h"

using namespace foldplan;

namespace {

using testing::Close;
using testing::H200;
using testing::kBw;
using ComputeSetup = testing::ComputeSetup;

Recompute Modules(const char* text) {
  auto r = ParseRecompute(text);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  return r.value();
}

// deepseek-v3 at tp 1, ep 64 with the given recompute set and precision.
ComputeTimes DeepSeek(const ComputeSetup& s, Recompute r, Precision p = Precision::kBF16) {
  Layout l;
  l.ep = 64;
  l.recompute = r;
  l.precision = p;
  return ComputeLayerTimes(l, s.ctx);
}

}  // namespace

TEST_CASE("moe_act recomputes the experts' activation; layernorm the two input norms") {
  // Both are memory-bound: their recompute FLOPs are 0.
  ComputeSetup s("deepseek-v3");
  const LayerTimes none = DeepSeek(s, Recompute::None()).moe_layer;
  const LayerTimes act = DeepSeek(s, Modules("moe_act")).moe_layer;
  CHECK(act.recompute_s == none.expert_activation.fwd_s);
  CHECK(act.recompute_flops == 0);
  const LayerTimes ln = DeepSeek(s, Modules("layernorm")).moe_layer;
  // 2 RMSNorms of [4096, 7168], 4 bytes per element.
  CHECK(ln.recompute_s == Close(4 * 2 * 4096.0 * 7168 / kBw));
  CHECK(ln.recompute_flops == 0);
  // The Qwen3 recipe's pair is the sum of both.
  const LayerTimes both = DeepSeek(s, Modules("layernorm+moe_act")).moe_layer;
  CHECK(both.recompute_s == Close(none.expert_activation.fwd_s + none.norms.fwd_s));
  // Recomputation changes neither the forward nor the backward.
  CHECK(both.fwd_s() == none.fwd_s());
  CHECK(both.bwd_s() == none.bwd_s());
}

TEST_CASE("mla_up_proj recomputes q_b and kv_b and the rope kernels on their output") {
  // deepseek-v3 tp 1: q_b [4096, 1536] x [1536, 128 x 192], kv_b
  // [4096, 512] x [512, 128 x 256], and the fused MLA rope (the rotary part).
  ComputeSetup s("deepseek-v3");
  const LayerTimes none = DeepSeek(s, Recompute::None()).moe_layer;
  const LayerTimes up = DeepSeek(s, Modules("mla_up_proj")).moe_layer;
  const ComputeProfile& p = H200();
  const double q_b = 2.0 * 4096 * 1536 * 24576, kv_b = 2.0 * 4096 * 512 * 32768;
  const double gemm_s = q_b / p.GemmFlopsPerS(4096, 24576, 1536, Precision::kBF16) +
                        kv_b / p.GemmFlopsPerS(4096, 32768, 512, Precision::kBF16);
  CHECK(up.recompute_flops == q_b + kv_b);
  CHECK(up.recompute_s == Close(gemm_s + none.rotary.fwd_s));
  // Under FP8 the recomputed up-projections quantize their inputs again:
  // [4096, 1536] + [4096, 512] at 4 bytes (delayed).
  const LayerTimes none8 = DeepSeek(s, Recompute::None(), Precision::kFP8Delayed).moe_layer;
  const LayerTimes up8 = DeepSeek(s, Modules("mla_up_proj"), Precision::kFP8Delayed).moe_layer;
  const double up8_gemm_s =
      q_b / p.GemmFlopsPerS(4096, 24576, 1536, Precision::kFP8Delayed) +
      kv_b / p.GemmFlopsPerS(4096, 32768, 512, Precision::kFP8Delayed);
  CHECK(up8.recompute_s ==
        Close(up8_gemm_s + none8.rotary.fwd_s + 4 * 4096.0 * (1536 + 512) / kBw));
}

TEST_CASE("mlp recomputes the dense MLP: both GEMMs and the activation") {
  ComputeSetup s("deepseek-v3");
  const LayerTimes none = DeepSeek(s, Recompute::None()).dense_layer;
  const LayerTimes mlp = DeepSeek(s, Modules("mlp")).dense_layer;
  CHECK(mlp.recompute_s == Close(none.mlp.fwd_s + none.mlp_activation.fwd_s));
  CHECK(mlp.recompute_flops == none.mlp.fwd_flops);
  // A MoE layer has no dense MLP: nothing to recompute.
  CHECK(DeepSeek(s, Modules("mlp")).moe_layer.recompute_s == 0);
}

TEST_CASE("moe recomputes the whole MoE block's forward; shared_experts the shared experts") {
  // moe: router GEMM and scores, permute, routed experts and their
  // activation, shared experts and theirs, and the routed + shared sum
  // (6 bytes x [4096, 7168]). The dispatch / combine repeats are the
  // communication model's.
  ComputeSetup s("deepseek-v3");
  const LayerTimes none = DeepSeek(s, Recompute::None()).moe_layer;
  const LayerTimes moe = DeepSeek(s, Modules("moe")).moe_layer;
  const double sum_add = 6 * 4096.0 * 7168 / kBw;
  CHECK(moe.recompute_s ==
        Close(none.router.fwd_s + none.router_scores.fwd_s + none.permute.fwd_s +
              none.routed_experts.fwd_s + none.expert_activation.fwd_s + none.shared_experts.fwd_s +
              none.shared_activation.fwd_s + sum_add));
  CHECK(moe.recompute_flops ==
        Close(none.router.fwd_flops + none.routed_experts.fwd_flops + none.shared_experts.fwd_flops));
  const LayerTimes shared = DeepSeek(s, Modules("shared_experts")).moe_layer;
  CHECK(shared.recompute_s == Close(none.shared_experts.fwd_s + none.shared_activation.fwd_s));
  CHECK(shared.recompute_flops == none.shared_experts.fwd_flops);
  // Modules inside moe add nothing to it: each part is counted once.
  const LayerTimes all = DeepSeek(s, Modules("moe+moe_act+shared_experts")).moe_layer;
  CHECK(all.recompute_s == Close(moe.recompute_s));
  CHECK(all.recompute_flops == moe.recompute_flops);
}

TEST_CASE("full recomputes the layer's forward; every set matches RecomputeFlops") {
  ComputeSetup s("deepseek-v3");
  const LayerTimes none = DeepSeek(s, Recompute::None()).moe_layer;
  const LayerTimes full = DeepSeek(s, Recompute::Full()).moe_layer;
  CHECK(full.recompute_s == Close(none.fwd_s()));
  CHECK(full.recompute_flops == Close(none.fwd_flops()));
  Layout l;
  l.ep = 64;
  for (const char* set : {"none", "selective", "full", "moe_act", "layernorm", "mla_up_proj", "mlp",
                          "moe", "shared_experts", "core_attn+mla_up_proj+moe"}) {
    CAPTURE(std::string(set));
    const Recompute r = Modules(set);
    const ComputeTimes t = DeepSeek(s, r);
    for (bool moe_layer : {false, true}) {
      const LayerFlops f = LayerForwardFlops(s.model, s.job, l, moe_layer);
      const LayerTimes& layer = moe_layer ? t.moe_layer : t.dense_layer;
      CHECK(layer.recompute_flops == Close(RecomputeFlops(f, r)));
    }
  }
}

TEST_CASE("the experts' share: their parts, their GEMMs' FP8 casts and what recomputation reruns of them") {
  // ExpertsBlockCost (what EP overlap pairs with the other micro-batch's
  // dispatch and its gradient): a MoE layer's routed and shared experts
  // with their activations (and the gate), the FP8 casts of those GEMMs;
  // recomputation of moe_act and shared_experts counts there, of
  // layernorm, core_attn and mla_up_proj not; W, the experts' GEMMs'
  // forward time. A dense layer's: its MLP and activation.
  ComputeSetup s("deepseek-v3");
  const LayerTimes none = DeepSeek(s, Recompute::None()).moe_layer;
  const BlockCost x = ExpertsBlockCost(none);
  CHECK(x.forward_s == Close(none.routed_experts.fwd_s + none.expert_activation.fwd_s + none.shared_experts.fwd_s +
                             none.shared_activation.fwd_s));
  CHECK(x.backward_s == Close(none.routed_experts.bwd_s + none.expert_activation.bwd_s + none.shared_experts.bwd_s +
                              none.shared_activation.bwd_s));
  CHECK(x.recompute_s == 0);
  CHECK(x.weight_grad_s == Close(none.routed_experts.fwd_s + none.shared_experts.fwd_s));
  CHECK(x.forward_s < LayerBlockCost(none).forward_s);
  CHECK(none.experts_fp8_casts.fwd_s == 0);  // bf16: no casts
  // moe_act + shared_experts rerun only experts' parts; layernorm +
  // core_attn + mla_up_proj none of them.
  const LayerTimes experts = DeepSeek(s, Modules("moe_act+shared_experts")).moe_layer;
  CHECK(experts.recompute_experts_s == experts.recompute_s);
  CHECK(experts.recompute_experts_s ==
        Close(none.expert_activation.fwd_s + none.shared_experts.fwd_s + none.shared_activation.fwd_s));
  CHECK(ExpertsBlockCost(experts).recompute_s == experts.recompute_experts_s);
  const LayerTimes attention = DeepSeek(s, Modules("layernorm+core_attn+mla_up_proj")).moe_layer;
  CHECK(attention.recompute_s > 0);
  CHECK(attention.recompute_experts_s == 0);
  // The Qwen3 recipe's pair: only the activation is the experts'.
  const LayerTimes pair = DeepSeek(s, Modules("layernorm+moe_act")).moe_layer;
  CHECK(pair.recompute_experts_s == none.expert_activation.fwd_s);
  // Full reruns the experts' whole forward.
  const LayerTimes full = DeepSeek(s, Recompute::Full()).moe_layer;
  CHECK(full.recompute_experts_s == Close(x.forward_s));
  // FP8 (delayed, 4 bytes a cast element): the experts' casts are those of
  // the routed experts' inputs (fc1 R x H, fc2 R x F_e) and the shared
  // experts' (T x H, T x F_s), a part of all the layer's casts.
  const LayerTimes fp8 = DeepSeek(s, Recompute::None(), Precision::kFP8Delayed).moe_layer;
  CHECK(fp8.experts_fp8_casts.fwd_s > 0);
  CHECK(fp8.experts_fp8_casts.fwd_s < fp8.fp8_casts.fwd_s);
  CHECK(fp8.experts_fp8_casts.bwd_s < fp8.fp8_casts.bwd_s);
  const BlockCost x8 = ExpertsBlockCost(fp8);
  CHECK(x8.forward_s == Close(fp8.routed_experts.fwd_s + fp8.expert_activation.fwd_s + fp8.shared_experts.fwd_s +
                              fp8.shared_activation.fwd_s + fp8.experts_fp8_casts.fwd_s));
  // The dense layer: its MLP.
  const LayerTimes dense = DeepSeek(s, Recompute::None()).dense_layer;
  CHECK(ExpertsBlockCost(dense).forward_s == Close(dense.mlp.fwd_s + dense.mlp_activation.fwd_s));
  CHECK(ExpertsBlockCost(dense).weight_grad_s == dense.mlp.fwd_s);
}
