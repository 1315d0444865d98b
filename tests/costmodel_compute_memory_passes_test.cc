// The memory-bound passes of a layer (costmodel/compute_time.h): each case
// states the bytes a pass reads + writes on one rank, then asserts the
// seconds they imply at the H200 profile's device-copy bandwidth
// (4224.003837367019 GB/s, bytes read + written). S = 4096, mbs 1; T =
// mbs S / (cp tp) sequence-parallel rows, M = mbs S / cp rows of TP-split
// activations, R = etp T K load routed rows on the busiest EP rank.
#include <doctest/doctest.h>

#include <string>

#include "costmodel/routing.h"
#include "costmodel_compute_fixtures.h"

using namespace foldplan;

namespace {

using testing::Close;
using testing::H200;
using testing::kBw;
using ComputeSetup = testing::ComputeSetup;

Layout PassLayout(int tp, int ep, Dispatcher dispatcher = Dispatcher::kAllToAll) {
  Layout l;
  l.tp = tp;
  l.ep = ep;
  l.dispatcher = dispatcher;
  return l;
}

// Sum of the GEMM and attention parts (the ones with FLOPs).
double MatmulFwdS(const LayerTimes& t) {
  return t.attention_projections.fwd_s + t.attention_core.fwd_s + t.mlp.fwd_s + t.router.fwd_s +
         t.routed_experts.fwd_s + t.shared_experts.fwd_s;
}

}  // namespace

TEST_CASE("qwen3 at tp 2: norms, QK-norm, rotary and residual adds by bytes") {
  // qwen3-235b-a22b: H 4096, 64 query / 4 KV heads of 128, QK-norm. tp 2:
  // T = 2048, M = 4096.
  //   input norms: 2 RMSNorms of [T, H]: 2 x 2048 x 4096 = 16,777,216
  //     elements, 4 bytes each forward, 6 backward;
  //   q and k per rank: M (a + a_kv) d / tp = 4096 x (32 + 2) x 128 =
  //     17,825,792 elements: QK-norm 4 / 6 bytes, rotary 4 / 4 bytes;
  //   residual adds: 2 x [T, H], 6 bytes forward and backward (no shared
  //     experts, so no routed + shared sum).
  ComputeSetup s("qwen3-235b-a22b");
  const LayerTimes t = s.Times(PassLayout(2, 32)).moe_layer;
  const double norm = 2.0 * 2048 * 4096, qk = 4096.0 * 34 * 128;
  CHECK(t.norms.fwd_s == Close(4 * norm / kBw));
  CHECK(t.norms.bwd_s == Close(6 * norm / kBw));
  CHECK(t.qk_norm.fwd_s == Close(4 * qk / kBw));
  CHECK(t.qk_norm.bwd_s == Close(6 * qk / kBw));
  CHECK(t.rotary.fwd_s == Close(4 * qk / kBw));
  CHECK(t.rotary.bwd_s == Close(4 * qk / kBw));
  CHECK(t.residual_adds.fwd_s == Close(6 * norm / kBw));
  CHECK(t.residual_adds.bwd_s == Close(6 * norm / kBw));
  // Memory-bound parts carry no FLOPs (MFU counts matmuls).
  CHECK(t.norms.fwd_flops == 0);
  CHECK(t.permute.fwd_flops == 0);
  CHECK(t.expert_activation.fwd_flops == 0);
}

TEST_CASE("a model without QK-norm has none; learned positions have no rotary") {
  // llama3-70b has no QK-norm; GPT-3 uses learned absolute positions.
  ComputeSetup llama("llama3-70b");
  CHECK(llama.Times(PassLayout(8, 1)).dense_layer.qk_norm.fwd_s == 0);
  CHECK(llama.Times(PassLayout(8, 1)).dense_layer.rotary.fwd_s > 0);
  ComputeSetup gpt("gpt3-175b");
  CHECK(gpt.Times(PassLayout(8, 1)).dense_layer.rotary.fwd_s == 0);
}

TEST_CASE("qwen3 router scores: fused 27 / 45 bytes, unfused 62 / 48 per T x E score") {
  // T x E = 2048 x 128 = 262,144 fp32 scores at tp 2.
  ComputeSetup s("qwen3-235b-a22b");
  const double scores = 2048.0 * 128;
  s.job.moe_router_fusion = true;
  const LayerTimes fused = s.Times(PassLayout(2, 32)).moe_layer;
  CHECK(fused.router_scores.fwd_s == Close(27 * scores / kBw));
  CHECK(fused.router_scores.bwd_s == Close(45 * scores / kBw));
  s.job.moe_router_fusion = false;
  const LayerTimes eager = s.Times(PassLayout(2, 32)).moe_layer;
  CHECK(eager.router_scores.fwd_s == Close(62 * scores / kBw));
  CHECK(eager.router_scores.bwd_s == Close(48 * scores / kBw));
  // The router GEMM itself is unchanged by the fusion.
  CHECK(eager.router.fwd_s == fused.router.fwd_s);
}

TEST_CASE("alltoall permute: fused (1 + K) + (K + 1) rows per token, unfused 2K + (1 + 3K), plus chunk sorts") {
  // qwen3 tp 2 ep 32: T = 2048 tokens, K = 8, 4 local experts, rows of
  // H x 2 = 8192 bytes; R = T K = 16384 rows received.
  //   fused:   permute (T + TK) + unpermute (TK + T) = 2 x 2048 x 9 = 36,864 rows
  //   unfused: permute 2 TK + unpermute (T + 3 TK)   = 32,768 + 51,200 = 83,968 rows
  //   chunk sorts (4 local experts): after dispatch and before combine, a
  //   read + write of R rows each: 4 x 16,384 = 65,536 rows.
  // Forward and backward move the same bytes.
  ComputeSetup s("qwen3-235b-a22b");
  const double row = 8192;
  s.job.moe_permute_fusion = true;
  const LayerTimes fused = s.Times(PassLayout(2, 32)).moe_layer;
  CHECK(fused.permute.fwd_s == Close((36864 + 65536) * row / kBw));
  CHECK(fused.permute.bwd_s == Close((36864 + 65536) * row / kBw));
  s.job.moe_permute_fusion = false;
  const LayerTimes eager = s.Times(PassLayout(2, 32)).moe_layer;
  CHECK(eager.permute.fwd_s == Close((83968 + 65536) * row / kBw));
  CHECK(eager.permute.bwd_s == eager.permute.fwd_s);
  // One local expert needs no chunk sort: qwen3 at ep 128 (T K rows only).
  s.job.moe_permute_fusion = true;
  const LayerTimes one = s.Times(PassLayout(2, 128)).moe_layer;
  CHECK(one.permute.fwd_s == Close(36864 * row / kBw));
}

TEST_CASE("permute and unpermute byte rules") {
  // Fused: (in + out) rows; unfused permute 2 out; unfused unpermute
  // out + 3 in (zero-fill, then read each copy and read-modify-write its row).
  CHECK(PermuteBytes(10, 80, 2, true) == 180);
  CHECK(PermuteBytes(10, 80, 2, false) == 320);
  CHECK(UnpermuteBytes(80, 10, 2, true) == 180);
  CHECK(UnpermuteBytes(80, 10, 2, false) == 500);
}

TEST_CASE("distinct EP ranks per token") {
  // One expert per rank: a token's K experts are on exactly K ranks.
  CHECK(ExpectedDistinctRanks(8, 2, 8) == doctest::Approx(2).epsilon(1e-12));
  // One rank holds every expert.
  CHECK(ExpectedDistinctRanks(128, 8, 1) == 1);
  // qwen3, ep 32 (4 experts per rank): 32 (1 - prod_{i<8} (124 - i) / (128 - i)).
  double none = 1;
  for (int i = 0; i < 8; ++i) none *= (124.0 - i) / (128.0 - i);
  CHECK(ExpectedDistinctRanks(128, 8, 32) == Close(32 * (1 - none)));
  CHECK(ExpectedDistinctRanks(128, 8, 32) < 8);
  CHECK(ExpectedDistinctRanks(128, 8, 32) > 7);
}

TEST_CASE("flex and allgather dispatchers permute on the receiving rank") {
  // qwen3 tp 2 ep 32: R = 16384 rows; the distinct tokens reaching a rank
  // are U = T D = 2048 x ExpectedDistinctRanks(128, 8, 32).
  //   DeepEP: permute U -> R, unpermute R -> U: fused 2 (U + R) rows, no
  //     chunk sort (DeepEP delivers per rank, the permute orders by expert).
  //   allgather: the unpermute writes the whole gathered buffer of
  //     ep etp T = 65,536 rows: fused (U + R) + (R + 65,536) rows.
  ComputeSetup s("qwen3-235b-a22b");
  const double row = 8192, r = 16384;
  const double u = 2048 * ExpectedDistinctRanks(128, 8, 32);
  const LayerTimes deepep = s.Times(PassLayout(2, 32, Dispatcher::kDeepEP)).moe_layer;
  CHECK(deepep.permute.fwd_s == Close(2 * (u + r) * row / kBw));
  const LayerTimes hybrid = s.Times(PassLayout(2, 32, Dispatcher::kHybridEP)).moe_layer;
  CHECK(hybrid.permute.fwd_s == deepep.permute.fwd_s);
  const LayerTimes gather = s.Times(PassLayout(2, 32, Dispatcher::kAllGather)).moe_layer;
  CHECK(gather.permute.fwd_s == Close((u + r + r + 65536) * row / kBw));
  CHECK(gather.permute.bwd_s == gather.permute.fwd_s);
}

TEST_CASE("expert activation runs on R rows of F_e / etp; ETP does not change it") {
  // qwen3 tp 2 ep 32: R x F_e = 16384 x 1536 = 25,165,824 SwiGLU outputs,
  // 6 bytes forward, 10 backward. With etp 2 (ep 16): 2 R rows of F_e / 2,
  // the same elements.
  ComputeSetup s("qwen3-235b-a22b");
  const double e = 16384.0 * 1536;
  const LayerTimes t = s.Times(PassLayout(2, 32)).moe_layer;
  CHECK(t.expert_activation.fwd_s == Close(6 * e / kBw));
  CHECK(t.expert_activation.bwd_s == Close(10 * e / kBw));
  Layout etp2 = PassLayout(2, 16);
  etp2.etp = 2;
  CHECK(s.Times(etp2).moe_layer.expert_activation.fwd_s == Close(6 * e / kBw));
  // The busiest rank's load multiplies it: imbalance 1.25.
  s.job.routing_imbalance = 1.25;
  CHECK(s.Times(PassLayout(2, 32)).moe_layer.expert_activation.fwd_s == Close(1.25 * 6 * e / kBw));
}

TEST_CASE("deepseek-v3 MLA: latent norms, the fused rope kernels, shared experts") {
  // tp 1, ep 64: T = M = 4096, H 7168, 128 heads, d_qk 192 (128 + 64),
  // d_v 128, q LoRA 1536, kv LoRA 512, 1 shared expert of 2048.
  //   latent norms: T (1536 + 512) elements, 4 / 6 bytes;
  //   rope: q read + written, 4 x 4096 x 128 x 192; the kv kernel reads
  //     kv_b's output 2 x 4096 x 128 x 256 and writes k and v,
  //     2 x 4096 x 128 x (192 + 128); backward the same bytes;
  //   shared SwiGLU on [M, 2048]: 6 / 10 bytes per element;
  //   residual adds: 2 x 6 x T H forward and backward, plus the routed +
  //     shared sum, 6 T H forward only.
  ComputeSetup s("deepseek-v3");
  const LayerTimes t = s.Times(PassLayout(1, 64)).moe_layer;
  const double latent = 4096.0 * 2048;
  CHECK(t.qk_norm.fwd_s == Close(4 * latent / kBw));
  CHECK(t.qk_norm.bwd_s == Close(6 * latent / kBw));
  const double rope = 4 * 4096.0 * 128 * 192 + 2 * 4096.0 * 128 * 256 + 2 * 4096.0 * 128 * 320;
  CHECK(t.rotary.fwd_s == Close(rope / kBw));
  CHECK(t.rotary.bwd_s == Close(rope / kBw));
  const double shared = 4096.0 * 2048;
  CHECK(t.shared_activation.fwd_s == Close(6 * shared / kBw));
  CHECK(t.shared_activation.bwd_s == Close(10 * shared / kBw));
  const double th = 4096.0 * 7168;
  CHECK(t.residual_adds.fwd_s == Close(3 * 6 * th / kBw));
  CHECK(t.residual_adds.bwd_s == Close(2 * 6 * th / kBw));
  // Dense layers: no MoE passes, the dense SwiGLU on [M, 18432].
  const LayerTimes d = s.Times(PassLayout(1, 64)).dense_layer;
  CHECK(d.permute.fwd_s == 0);
  CHECK(d.router_scores.fwd_s == 0);
  CHECK(d.mlp_activation.fwd_s == Close(6 * 4096.0 * 18432 / kBw));
  CHECK(d.residual_adds.fwd_s == Close(2 * 6 * th / kBw));
}

TEST_CASE("dense MLP activation: SwiGLU on [M, F / tp], GELU 4 / 6 bytes") {
  // llama3-70b tp 8: 4096 x 28672 / 8 = 14,680,064 SwiGLU outputs (6 / 10).
  // gpt3-175b tp 8: GELU on 4096 x 49152 / 8 = 25,165,824 (4 / 6).
  ComputeSetup llama("llama3-70b");
  const LayerTimes l = llama.Times(PassLayout(8, 1)).dense_layer;
  CHECK(l.mlp_activation.fwd_s == Close(6 * 4096.0 * 3584 / kBw));
  CHECK(l.mlp_activation.bwd_s == Close(10 * 4096.0 * 3584 / kBw));
  ComputeSetup gpt("gpt3-175b");
  const LayerTimes g = gpt.Times(PassLayout(8, 1)).dense_layer;
  CHECK(g.mlp_activation.fwd_s == Close(4 * 4096.0 * 6144 / kBw));
  CHECK(g.mlp_activation.bwd_s == Close(6 * 4096.0 * 6144 / kBw));
}

TEST_CASE("the shared-expert gate multiplies [T, H]: 4 bytes forward, 6 backward") {
  // qwen2-57b-a14b has a sigmoid-gated shared expert block.
  ComputeSetup s("qwen2-57b-a14b");
  REQUIRE(s.model.moe->shared_expert_gate);
  const double th = 4096.0 * s.model.hidden / 2;  // tp 2
  const double shared_out = 4096.0 * s.model.moe->shared_experts * s.model.moe->shared_ffn_hidden / 2;
  const LayerTimes t = s.Times(PassLayout(2, 4)).moe_layer;
  CHECK(t.shared_activation.fwd_s == Close((6 * shared_out + 4 * th) / kBw));
  CHECK(t.shared_activation.bwd_s == Close((10 * shared_out + 6 * th) / kBw));
}

TEST_CASE("the layer's forward and backward include every named part") {
  // fwd_s() is the sum over kLayerParts; the memory-bound parts are what it
  // adds beyond the matmul parts.
  ComputeSetup s("deepseek-v3");
  const LayerTimes t = s.Times(PassLayout(1, 64)).moe_layer;
  const double memory = t.norms.fwd_s + t.qk_norm.fwd_s + t.rotary.fwd_s + t.residual_adds.fwd_s +
                        t.router_scores.fwd_s + t.permute.fwd_s + t.expert_activation.fwd_s +
                        t.shared_activation.fwd_s + t.mlp_activation.fwd_s;
  CHECK(t.fwd_s() == Close(MatmulFwdS(t) + memory));
  CHECK(t.fwd_flops() ==
        Close(t.attention_projections.fwd_flops + t.attention_core.fwd_flops + t.router.fwd_flops +
              t.routed_experts.fwd_flops + t.shared_experts.fwd_flops));
  double bwd = 0;
  for (const LayerPart& p : kLayerParts) bwd += (t.*p.part).bwd_s;
  CHECK(t.bwd_s() == Close(bwd));
  MESSAGE("deepseek-v3 tp1 ep64 on an H200: memory-bound passes " << memory * 1e3 << " ms of a "
                                                                   << t.fwd_s() * 1e3
                                                                   << " ms MoE layer forward");
}

TEST_CASE("MTP: next-token embedding, two norms and the concat, beside the projection GEMM") {
  // deepseek-v3 tp 1: M = T = 4096, H 7168, V 129280.
  //   projection GEMM [4096, 14336] x [14336, 7168] (bf16);
  //   embedding lookup: 4 M H forward; 6 M H + 12 V H backward;
  //   norms 2 x [T, H]: 4 / 6 bytes per element; concat: 8 T H forward.
  ComputeSetup s("deepseek-v3");
  const ComputeTimes t = s.Times(PassLayout(1, 64));
  const double gemm_s =
      2.0 * 4096 * 7168 * 14336 / H200().GemmFlopsPerS(4096, 7168, 14336, Precision::kBF16);
  const double th = 4096.0 * 7168, vh = 129280.0 * 7168;
  CHECK(t.mtp_projection.fwd_flops == 2.0 * 4096 * 7168 * 14336);
  CHECK(t.mtp_projection.fwd_s == Close(gemm_s + (4 * th + 2 * 4 * th + 8 * th) / kBw));
  CHECK(t.mtp_projection.bwd_s == Close(2 * gemm_s + (6 * th + 12 * vh + 2 * 6 * th) / kBw));
  // A model without MTP has none.
  ComputeSetup q("qwen3-235b-a22b");
  CHECK(q.Times(PassLayout(2, 32)).mtp_projection.fwd_s == 0);
}
