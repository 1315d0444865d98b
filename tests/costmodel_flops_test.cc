// Per-rank matmul FLOPs of one layer (costmodel/flops.h), checked against
// hand arithmetic. Each case states the math first; S = 4096, mbs = 1
// unless noted. A GEMM [m, k] x [k, n] is 2 m n k FLOPs; causal attention
// per head and sequence is S^2 (d_qk + d_v) forward.
#include <doctest/doctest.h>

#include <string>

#include "costmodel/flops.h"
#include "inputs/loader.h"
#include "planner/layout.h"
#include "shipped_model.h"

using namespace foldplan;

namespace {

using foldplan::testing::ShippedModel;

JobSpec Job(int seq_len = 4096, double imbalance = 1.0) {
  JobSpec j;
  j.seq_len = seq_len;
  j.routing_imbalance = imbalance;
  j.capacity_factor = 0;
  return j;
}

Layout FlopsLayout(int tp, int cp, int ep, int etp = 1, CpStyle style = CpStyle::kUlysses) {
  Layout l;
  l.tp = tp;
  l.cp = cp;
  l.ep = ep;
  l.etp = etp;
  l.cp_style = style;
  return l;
}

// Relative tolerance for sums of exact integers computed in another order.
doctest::Approx Exactly(double x) { return doctest::Approx(x).epsilon(1e-12); }

}  // namespace

TEST_CASE("mixtral-8x7b MoE layer, no parallelism: every part by hand") {
  // H 4096, 32 query / 8 KV heads of 128, 8 experts of width 14336, top 2.
  //   q     2 x 4096 x 4096 x (32 x 128)             = 137,438,953,472
  //   k, v  2 x 4096 x 4096 x (8 x 128), each         =  34,359,738,368
  //   o     2 x 4096 x (32 x 128) x 4096             = 137,438,953,472
  //   core  32 heads x 4096^2 x (128 + 128)          = 137,438,953,472
  //   router 2 x 4096 x 4096 x 8                      =     268,435,456
  //   experts 6 T K H F = 6 x 4096 x 2 x 4096 x 14336 = 2,886,218,022,912
  //   total                                           = 3,367,522,795,520
  const LayerFlops f = LayerForwardFlops(ShippedModel("mixtral-8x7b"), Job(), FlopsLayout(1, 1, 1), true);
  CHECK(f.q_proj_flops == 137'438'953'472.0);
  CHECK(f.k_proj_flops == 34'359'738'368.0);
  CHECK(f.v_proj_flops == 34'359'738'368.0);
  CHECK(f.o_proj_flops == 137'438'953'472.0);
  CHECK(f.attention_core_flops == 137'438'953'472.0);
  CHECK(f.router_flops == 268'435'456.0);
  CHECK(f.routed_experts_flops == Exactly(2'886'218'022'912.0));
  CHECK(f.mlp_flops == 0);
  CHECK(f.shared_experts_flops == 0);
  CHECK(f.total_flops() == Exactly(3'367'522'795'520.0));
}

TEST_CASE("mixtral-8x7b with tp 2, ep 8: projections and core halve, experts follow T") {
  // T = 4096 / 2 = 2048 tokens per rank. Attention parts are the tp = 1
  // figures / 2. Router: 2 x 2048 x 4096 x 8 = 134,217,728. Experts on one
  // EP rank (1 local expert): 6 x 2048 x 2 x 4096 x 14336 = 1,443,109,011,456.
  const ModelSpec m = ShippedModel("mixtral-8x7b");
  const LayerFlops f = LayerForwardFlops(m, Job(), FlopsLayout(2, 1, 8), true);
  CHECK(f.q_proj_flops == 137'438'953'472.0 / 2);
  CHECK(f.attention_core_flops == 137'438'953'472.0 / 2);
  CHECK(f.router_flops == 134'217'728.0);
  CHECK(f.routed_experts_flops == Exactly(1'443'109'011'456.0));
  const LayerWork w = LayerForwardWork(m, Job(), FlopsLayout(2, 1, 8), true);
  CHECK(w.experts_up.experts == 1);
  CHECK(w.experts_up.rows_per_expert == 2048 * 2);  // T K rows, all to the one local expert
  CHECK(w.experts_up.n == 2 * 14336);               // gate + up
  CHECK(w.q.m == 4096);                             // TP GEMMs see the all-gathered sequence
  CHECK(w.q.n == 32 * 128 / 2);
}

TEST_CASE("deepseek-v3 MLA layers, no parallelism: every part by hand") {
  // H 7168, 128 heads, q LoRA 1536, kv LoRA 512, nope 128, rope 64, v 128.
  //   q_a   2 x 4096 x 7168 x 1536                  =    90,194,313,216
  //   q_b   2 x 4096 x 1536 x 128 (128 + 64)        =   309,237,645,312
  //   kv_a  2 x 4096 x 7168 x (512 + 64)            =    33,822,867,456
  //   kv_b  2 x 4096 x 512 x 128 (128 + 128)        =   137,438,953,472
  //   o     2 x 4096 x (128 x 128) x 7168           =   962,072,674,304
  //   projections                                    = 1,532,766,453,760
  //   core  128 x 4096^2 x (192 + 128)              =   687,194,767,360
  // MoE layer (256 experts of 2048, top 8, 1 shared of 2048):
  //   router 2 x 4096 x 7168 x 256                   =    15,032,385,536
  //   routed 6 x 4096 x 8 x 7168 x 2048              = 2,886,218,022,912
  //   shared 6 x 4096 x 7168 x 2048                  =   360,777,252,864
  //   total                                          = 5,481,988,882,432
  // Dense layer (width 18432): MLP 6 x 4096 x 7168 x 18432 = 3,246,995,275,776,
  //   total 5,466,956,496,896.
  const ModelSpec m = ShippedModel("deepseek-v3");
  const LayerFlops moe = LayerForwardFlops(m, Job(), FlopsLayout(1, 1, 1), true);
  CHECK(moe.q_a_flops == 90'194'313'216.0);
  CHECK(moe.q_b_flops == 309'237'645'312.0);
  CHECK(moe.q_proj_flops == 0);
  CHECK(moe.kv_a_flops == 33'822'867'456.0);
  CHECK(moe.kv_b_flops == 137'438'953'472.0);
  CHECK(moe.o_proj_flops == 962'072'674'304.0);
  CHECK(moe.k_proj_flops == 0);
  CHECK(moe.attention_projection_flops() == 1'532'766'453'760.0);
  CHECK(moe.attention_core_flops == 687'194'767'360.0);
  CHECK(moe.router_flops == 15'032'385'536.0);
  CHECK(moe.routed_experts_flops == Exactly(2'886'218'022'912.0));
  CHECK(moe.shared_experts_flops == 360'777'252'864.0);
  CHECK(moe.total_flops() == Exactly(5'481'988'882'432.0));
  const LayerFlops dense = LayerForwardFlops(m, Job(), FlopsLayout(1, 1, 1), false);
  CHECK(dense.mlp_flops == 3'246'995'275'776.0);
  CHECK(dense.routed_experts_flops == 0);
  CHECK(dense.total_flops() == 5'466'956'496'896.0);
}

TEST_CASE("deepseek-v3 with tp 8: each part is the tp 1 figure / 8, LoRA downs on the SP shard") {
  // Megatron runs q_a and kv_a unsplit on the rank's 4096 / 8 = 512
  // sequence-parallel tokens: the same 1/8 of the FLOPs as a TP split.
  const ModelSpec m = ShippedModel("deepseek-v3");
  const LayerFlops one = LayerForwardFlops(m, Job(), FlopsLayout(1, 1, 1), true);
  const LayerFlops eight = LayerForwardFlops(m, Job(), FlopsLayout(8, 1, 8), true);
  CHECK(eight.q_a_flops == one.q_a_flops / 8);
  CHECK(eight.q_b_flops == one.q_b_flops / 8);
  CHECK(eight.kv_a_flops == one.kv_a_flops / 8);
  CHECK(eight.kv_b_flops == one.kv_b_flops / 8);
  CHECK(eight.o_proj_flops == one.o_proj_flops / 8);
  CHECK(eight.attention_core_flops == one.attention_core_flops / 8);
  CHECK(eight.router_flops == one.router_flops / 8);
  CHECK(eight.routed_experts_flops == Exactly(one.routed_experts_flops / 8));
  CHECK(eight.shared_experts_flops == one.shared_experts_flops / 8);
  const LayerWork w = LayerForwardWork(m, Job(), FlopsLayout(8, 1, 8), true);
  CHECK(w.q_a.m == 512);
  CHECK(w.q_a.n == 1536);
  CHECK(w.experts_up.experts == 32);                   // 256 / ep 8
  CHECK(w.experts_up.rows_per_expert == 512 * 8 / 32.0);  // T K / local experts
}

TEST_CASE("Ulysses CP, ring CP and TP split the same work equally") {
  // Per-rank work is total / (tp cp) for every part: Ulysses runs S for
  // heads / (tp cp) heads, ring runs heads / tp heads and 1/cp of the causal
  // work, TP splits heads and widths; tokens per rank T = S / (cp tp) is the
  // same for the router and experts.
  for (const char* name : {"mixtral-8x7b", "llama3-70b", "deepseek-v3"}) {
    CAPTURE(std::string(name));
    const ModelSpec m = ShippedModel(name);
    const bool moe = m.is_moe();
    const LayerFlops tp8 = LayerForwardFlops(m, Job(), FlopsLayout(8, 1, 8), moe);
    const LayerFlops ulysses8 = LayerForwardFlops(m, Job(), FlopsLayout(1, 8, 8), moe);
    const LayerFlops ring8 = LayerForwardFlops(m, Job(), FlopsLayout(1, 8, 8, 1, CpStyle::kRing), moe);
    const LayerFlops mixed = LayerForwardFlops(m, Job(), FlopsLayout(2, 4, 8), moe);
    for (const LayerFlops& f : {ulysses8, ring8, mixed}) {
      CHECK(f.attention_projection_flops() == Exactly(tp8.attention_projection_flops()));
      CHECK(f.attention_core_flops == Exactly(tp8.attention_core_flops));
      CHECK(f.mlp_flops == Exactly(tp8.mlp_flops));
      CHECK(f.router_flops == Exactly(tp8.router_flops));
      CHECK(f.routed_experts_flops == Exactly(tp8.routed_experts_flops));
      CHECK(f.shared_experts_flops == Exactly(tp8.shared_experts_flops));
    }
  }
  // The kernel shapes differ: Ulysses 4 heads over the full 4096 tokens,
  // ring 32 heads over 4096 / 8 = 512-token blocks.
  const ModelSpec m = ShippedModel("mixtral-8x7b");
  const LayerWork u = LayerForwardWork(m, Job(), FlopsLayout(1, 8, 8), true);
  CHECK(u.core.heads == 4);
  CHECK(u.core.seq == 4096);
  CHECK(u.core.kv_heads == 1);
  const LayerWork r = LayerForwardWork(m, Job(), FlopsLayout(1, 8, 8, 1, CpStyle::kRing), true);
  CHECK(r.core.heads == 32);
  CHECK(r.core.seq == 512);
}

TEST_CASE("expert FLOPs do not depend on ETP") {
  // ETP all-gathers etp T K rows and gives each rank 1/etp of the width:
  // 2 (etp T K)(H)(2F/etp) + 2 (etp T K)(F/etp)(H) = 6 T K H F.
  const ModelSpec m = ShippedModel("mixtral-8x7b");
  const double etp1 = LayerForwardFlops(m, Job(), FlopsLayout(2, 1, 4, 1), true).routed_experts_flops;
  const double etp2 = LayerForwardFlops(m, Job(), FlopsLayout(2, 1, 4, 2), true).routed_experts_flops;
  CHECK(etp2 == Exactly(etp1));
  const LayerWork w = LayerForwardWork(m, Job(), FlopsLayout(2, 1, 4, 2), true);
  CHECK(w.experts_up.rows_per_expert == 2 * 2048 * 2 / 2.0);  // etp T K / 2 local experts
  CHECK(w.experts_down.k == 14336 / 2);
}

TEST_CASE("routing imbalance and capacity factor multiply the routed expert FLOPs only") {
  // Busiest EP rank: 6 T K H F x load, load = routing_imbalance (dropless)
  // or capacity_factor (padded to capacity).
  const ModelSpec m = ShippedModel("deepseek-v3");
  const LayerFlops even = LayerForwardFlops(m, Job(4096, 1.0), FlopsLayout(1, 1, 8), true);
  const LayerFlops skewed = LayerForwardFlops(m, Job(4096, 1.3), FlopsLayout(1, 1, 8), true);
  CHECK(skewed.routed_experts_flops == Exactly(1.3 * even.routed_experts_flops));
  CHECK(skewed.attention_projection_flops() == even.attention_projection_flops());
  CHECK(skewed.router_flops == even.router_flops);
  CHECK(skewed.shared_experts_flops == even.shared_experts_flops);
  JobSpec padded = Job(4096, 1.3);
  padded.capacity_factor = 1.25;
  const LayerFlops capped = LayerForwardFlops(m, padded, FlopsLayout(1, 1, 8), true);
  CHECK(capped.routed_experts_flops == Exactly(1.25 * even.routed_experts_flops));
}

TEST_CASE("recomputation adds a full forward or the attention core, backward is 2x") {
  const LayerFlops f = LayerForwardFlops(ShippedModel("mixtral-8x7b"), Job(), FlopsLayout(1, 1, 1), true);
  CHECK(RecomputeFlops(f, Recompute::None()) == 0);
  CHECK(RecomputeFlops(f, Recompute::Selective()) == 137'438'953'472.0);
  CHECK(RecomputeFlops(f, Recompute::Full()) == f.total_flops());
  CHECK(BackwardFlops(f.total_flops()) == 2 * f.total_flops());
}

TEST_CASE("recompute modules add the FLOPs of their matmuls, each counted once") {
  // deepseek-v3 MoE layer, no parallelism (figures of the MLA case above):
  //   mla_up_proj = q_b + kv_b = 309,237,645,312 + 137,438,953,472
  //               = 446,676,598,784
  //   moe = router + routed + shared = 15,032,385,536 + 2,886,218,022,912
  //       + 360,777,252,864 = 3,262,027,661,312
  //   shared_experts = 360,777,252,864; moe_act, layernorm: 0 (no matmuls);
  //   mlp: 0 in a MoE layer; the dense layer's MLP 3,246,995,275,776.
  const ModelSpec m = ShippedModel("deepseek-v3");
  const LayerFlops f = LayerForwardFlops(m, Job(), FlopsLayout(1, 1, 1), true);
  auto modules = [](const char* text) { return ParseRecompute(text).value(); };
  CHECK(RecomputeFlops(f, modules("mla_up_proj")) == 446'676'598'784.0);
  CHECK(RecomputeFlops(f, modules("moe")) == Exactly(3'262'027'661'312.0));
  CHECK(RecomputeFlops(f, modules("shared_experts")) == 360'777'252'864.0);
  CHECK(RecomputeFlops(f, modules("moe_act+layernorm")) == 0);
  CHECK(RecomputeFlops(f, modules("mlp")) == 0);
  // moe already holds the shared experts.
  CHECK(RecomputeFlops(f, modules("moe+shared_experts")) == Exactly(3'262'027'661'312.0));
  // core_attn adds 687,194,767,360 to the others.
  CHECK(RecomputeFlops(f, modules("core_attn+mla_up_proj")) ==
        446'676'598'784.0 + 687'194'767'360.0);
  const LayerFlops dense = LayerForwardFlops(m, Job(), FlopsLayout(1, 1, 1), false);
  CHECK(RecomputeFlops(dense, modules("mlp")) == 3'246'995'275'776.0);
}

TEST_CASE("mbs scales every part linearly") {
  const ModelSpec m = ShippedModel("deepseek-v3");
  Layout two = FlopsLayout(2, 2, 8);
  two.mbs = 2;
  const LayerFlops f1 = LayerForwardFlops(m, Job(), FlopsLayout(2, 2, 8), true);
  const LayerFlops f2 = LayerForwardFlops(m, Job(), two, true);
  CHECK(f2.total_flops() == Exactly(2 * f1.total_flops()));
  CHECK(f2.attention_core_flops == 2 * f1.attention_core_flops);
}

TEST_CASE("output layer: 2 x tokens x hidden x vocab / tp; embedding none") {
  // llama3-70b, tp 4, cp 2, mbs 1: tokens 4096 / 2 = 2048;
  // 2 x 2048 x 8192 x 128256 / 4 = 1,075,889,307,648.
  Layout l = FlopsLayout(4, 2, 1);
  const GemmShape out = OutputLayerWork(ShippedModel("llama3-70b"), Job(), l);
  CHECK(out.m == 2048);
  CHECK(out.n == 128256 / 4);
  CHECK(out.flops() == 1'075'889'307'648.0);
  CHECK(kEmbeddingForwardFlops == 0);
}

TEST_CASE("ModelFlopsPerToken of llama3-70b is 6 N_matmul + 3 L S a (d_qk + d_v)") {
  // total params 70,553,706,496; less the input embedding 128256 x 8192 =
  // 1,050,673,152 and the norms 80 x 2 x 8192 + 8192 = 1,318,912:
  //   N_matmul = 69,501,714,432; 6 N = 417,010,286,592.
  // Attention: 3 x 80 x 4096 x 64 x (128 + 128) = 16,106,127,360.
  // Sum 433,116,413,952 FLOPs per token at S = 4096.
  const ModelSpec m = ShippedModel("llama3-70b");
  REQUIRE(m.total_params() == 70'553'706'496);
  const double n_matmul = double(m.total_params()) - 128256.0 * 8192 - (80 * 2 * 8192 + 8192);
  CHECK(n_matmul == 69'501'714'432.0);
  CHECK(ModelFlopsPerToken(m, 4096) == Exactly(6 * n_matmul + 16'106'127'360.0));
  CHECK(ModelFlopsPerToken(m, 4096) == Exactly(433'116'413'952.0));
}

TEST_CASE("ModelFlopsPerToken of mixtral-8x7b counts the top-2 experts (active params)") {
  // active 12,879,925,248 (inputs_params_test); less embedding 32000 x 4096
  // and norms 32 x 2 x 4096 + 4096: N_matmul = 12,748,587,008.
  // Attention 3 x 32 x 4096 x 32 x 256 = 3,221,225,472; sum 79,712,747,520.
  const ModelSpec m = ShippedModel("mixtral-8x7b");
  const double n_matmul = double(m.active_params()) - 32000.0 * 4096 - (32 * 2 * 4096 + 4096);
  CHECK(n_matmul == 12'748'587'008.0);
  CHECK(ModelFlopsPerToken(m, 4096) == Exactly(6 * n_matmul + 3'221'225'472.0));
  CHECK(ModelFlopsPerToken(m, 4096) == Exactly(79'712'747'520.0));
}

TEST_CASE("per-rank FLOPs x ranks add up to ModelFlopsPerToken (deepseek-v3, tp 4 cp 2 mbs 2)") {
  // Every part is total / (tp cp) per rank with balanced routing, so
  // 3 x (sum of layers + output) x tp cp / (mbs S) is the per-token figure.
  const ModelSpec m = ShippedModel("deepseek-v3");
  Layout l = FlopsLayout(4, 2, 8);
  l.mbs = 2;
  const JobSpec job = Job();
  const int moe_layers = m.moe_layer_count();
  const double per_rank =
      (m.layers - moe_layers) * LayerForwardFlops(m, job, l, false).total_flops() +
      moe_layers * LayerForwardFlops(m, job, l, true).total_flops() +
      OutputLayerWork(m, job, l).flops();
  const double per_token = 3 * per_rank * (4 * 2) / (2 * 4096);
  CHECK(per_token == Exactly(ModelFlopsPerToken(m, 4096)));
}

TEST_CASE("ModelFlopsPerTokenFullAttention counts the full S x S scores: 6 L S a (d_qk + d_v)") {
  // llama3-70b at S 4096: the causal attention term 3 x 80 x 4096 x 64 x 256
  // = 16,106,127,360 doubles, so 433,116,413,952 + 16,106,127,360 =
  // 449,222,541,312 FLOPs per token.
  const ModelSpec llama = ShippedModel("llama3-70b");
  CHECK(ModelFlopsPerTokenFullAttention(llama, 4096) == Exactly(449'222'541'312.0));
  // GPT-3 175B (MHA, a d = H = 12288, 96 layers) at S 2048: the full count's
  // attention term is PaLM's 12 L S H = 28,991,029,248, the causal count's
  // half of it, so the two differ by 6 L S H = 14,495,514,624.
  const ModelSpec gpt = ShippedModel("gpt3-175b");
  CHECK(ModelFlopsPerTokenFullAttention(gpt, 2048) - ModelFlopsPerToken(gpt, 2048) ==
        Exactly(14'495'514'624.0));
}
