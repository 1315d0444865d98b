// The measured compute profile (costmodel/compute_profile.h) and the
// per-layer compute times built on it (costmodel/compute_time.h). Each case
// states the rule, then asserts the number it implies from the H200 file
// data/compute/h200.json (rates quoted from it in TFLOP/s).
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/json_check.h"
#include "costmodel/compute_profile.h"
#include "costmodel/compute_time.h"
#include "costmodel/cost_context.h"
#include "costmodel_compute_fixtures.h"
#include "inputs/loader.h"
#include "tests/fixtures.h"
#include "shipped_model.h"

using namespace foldplan;

namespace {

using testing::Close;
using testing::H200;
const std::string& kH200 = testing::kH200Profile;

nlohmann::json H200Json() {
  auto j = ParseJsonFile(kH200);
  REQUIRE(j.ok());
  return j.value();
}

using foldplan::testing::ShippedModel;


constexpr double T = 1e12;  // TFLOP/s

}  // namespace

TEST_CASE("the shipped profile loads, from its default path too") {
  CHECK(ComputeProfile::DefaultPath().size() > 0);
  auto p = ComputeProfile::Load(ComputeProfile::DefaultPath());
  REQUIRE_MESSAGE(p.ok(), p.status().message());
  CHECK(p->gpu() == "NVIDIA H200");
  CHECK(p->scaled_to() == "");
  CHECK(p->copy_gb_per_s() == 4224.003837367019);
}

TEST_CASE("a GEMM at a measured point returns the measured rate exactly") {
  // mixtral-8x7b up_glu: M 1024, K 4096, N 28672 measured 771.762... TFLOP/s.
  CHECK(H200().GemmFlopsPerS(1024, 28672, 4096, Precision::kBF16) == Close(771.7622443475088 * T));
  // mixtral-8x7b down: M 1024, K 14336, N 4096 measured 773.748...
  CHECK(H200().GemmFlopsPerS(1024, 4096, 14336, Precision::kBF16) == Close(773.7484892371485 * T));
  // fp8 up_glu at the same point: 1332.42.
  CHECK(H200().GemmFlopsPerS(1024, 28672, 4096, Precision::kFP8Tensorwise) == Close(1332.4220755728297 * T));
}

TEST_CASE("between measured M the rate is linear in log M") {
  // M 1536 lies t = log(1536/1024) / log(2) = 0.58496 of the way from M 1024
  // (771.76) to M 2048 (781.92): 771.76 + t x 10.16 = 777.70 TFLOP/s.
  const double t = std::log(1.5) / std::log(2.0);
  const double expected = 771.7622443475088 + t * (781.9186449135474 - 771.7622443475088);
  const double rate = H200().GemmFlopsPerS(1536, 28672, 4096, Precision::kBF16);
  CHECK(rate == Close(expected * T));
  CHECK(rate > 771.76 * T);
  CHECK(rate < 781.92 * T);
}

TEST_CASE("outside the measured M: time held below, rate held above") {
  // Below M 64 (244.54 TFLOP/s) the GEMM is bound by reading its weights:
  // M 32 takes as long as M 64, so it runs at half the rate.
  CHECK(H200().GemmFlopsPerS(32, 28672, 4096, Precision::kBF16) == Close(244.54037376312291 / 2 * T));
  // Above M 32768 (717.45) the rate stays.
  CHECK(H200().GemmFlopsPerS(1 << 20, 28672, 4096, Precision::kBF16) == Close(717.4464007446029 * T));
}

TEST_CASE("an unmeasured (N, K) uses the nearest measured shape in log space") {
  // N 28000, K 4000 is nearest to mixtral-8x7b up_glu (28672, 4096).
  CHECK(H200().GemmFlopsPerS(1024, 28000, 4000, Precision::kBF16) == Close(771.7622443475088 * T));
}

TEST_CASE("FP8 without an FP8 point: BF16 x the nearest both-precision shape's FP8/BF16 ratio") {
  // mixtral-8x7b down (N 4096, K 14336) has no FP8 points. The nearest shape
  // measured in both is deepseek-v3-moe up_glu (N 4096, K 7168; log distance
  // log 2), at M 1024: 1308.53 / 743.29. So FP8 = 773.75 x 1308.53 / 743.29.
  const double expected = 773.7484892371485 * 1308.5293894775025 / 743.2944019469293;
  CHECK(H200().GemmFlopsPerS(1024, 4096, 14336, Precision::kFP8Tensorwise) == Close(expected * T));
}

TEST_CASE("grouped GEMM: measured point exact, linear in log(experts) between counts") {
  // deepseek-v3-moe experts K 7168, N 4096, 256 tokens per expert:
  // 8 experts 668.34, 16 experts 690.13 TFLOP/s.
  const ComputeProfile& p = H200();
  CHECK(p.GroupedGemmFlopsPerS(8, 256, 7168, 4096) == Close(668.3436323655973 * T));
  // 11 experts: t = log(11/8) / log(2) = 0.4594 -> 668.34 + t x 21.79.
  const double t = std::log(11.0 / 8) / std::log(2.0);
  const double expected = 668.3436323655973 + t * (690.1288127700335 - 668.3436323655973);
  CHECK(p.GroupedGemmFlopsPerS(11, 256, 7168, 4096) == Close(expected * T));
  // One expert is a plain GEMM.
  CHECK(p.GroupedGemmFlopsPerS(1, 1024, 7168, 4096) ==
        p.GemmFlopsPerS(1024, 4096, 7168, Precision::kBF16));
  // FP8 applies the plain GEMM's FP8/BF16 ratio at M = tokens_per_expert.
  const double ratio = p.GemmFlopsPerS(256, 4096, 7168, Precision::kFP8Tensorwise) /
                       p.GemmFlopsPerS(256, 4096, 7168, Precision::kBF16);
  CHECK(p.GroupedGemmFlopsPerS(8, 256, 7168, 4096, Precision::kFP8Tensorwise) ==
        Close(668.3436323655973 * T * ratio));
}

TEST_CASE("attention: measured points, repeated points averaged, fewer heads at equal grid") {
  const ComputeProfile& p = H200();
  const AttentionBackend fa2 = AttentionBackend::kFlash2;
  auto kernel = [](double seq, int heads, int kv) { return AttentionKernel{seq, heads, kv, 128, 128, true}; };
  // FlashAttention-2, 32 / 32 heads, d 128, S 8192: forward 319.79, forward+backward 287.24.
  CHECK(p.AttentionFlopsPerS(fa2, kernel(8192, 32, 32), false) == Close(319.79205294731383 * T));
  CHECK(p.AttentionFlopsPerS(fa2, kernel(8192, 32, 32), true) == Close(287.24211963909346 * T));
  // 8 / 8 heads at S 2048 was measured twice (134.96 and 133.25): the mean.
  const double mean = (134.9600072818804 + 133.25165532613792) / 2;
  CHECK(p.AttentionFlopsPerS(fa2, kernel(2048, 8, 8), false) == Close(mean * T));
  // 4 heads over 4096 tokens: the same number of query blocks as 8 heads
  // over 2048, the smallest measured head count (faster than half the
  // 8-head rate at 4096, (173.81 + 171.35) / 4 = 86.3, the bound).
  CHECK(p.AttentionFlopsPerS(fa2, kernel(4096, 4, 4), false) == p.AttentionFlopsPerS(fa2, kernel(2048, 8, 8), false));
  // Beyond the longest measured sequence the rate is held.
  CHECK(p.AttentionFlopsPerS(fa2, kernel(1 << 20, 32, 32), false) ==
        p.AttentionFlopsPerS(fa2, kernel(65536, 32, 32), false));
}

TEST_CASE("scaling to another GPU multiplies by the peak and HBM ratios") {
  // Target: 2500 TFLOP/s bf16, 5000 fp8, 8 TB/s. Profiled H200: 989, 1979, 4.8.
  GpuSpec big;
  big.name = "GB200-like";
  big.peak_bf16_flops = 2500e12;
  big.peak_fp8_flops = 5000e12;
  big.hbm_tb_per_s = 8;
  const ComputeProfile& p = H200();
  const ComputeProfile s = p.ScaledTo(big);
  CHECK(s.scaled_to() == "GB200-like");
  const double bf16 = 2500.0 / 989, fp8 = 5000.0 / 1979, hbm = 8 / 4.8;
  CHECK(s.GemmFlopsPerS(1536, 28672, 4096, Precision::kBF16) ==
        Close(bf16 * p.GemmFlopsPerS(1536, 28672, 4096, Precision::kBF16)));
  CHECK(s.GemmFlopsPerS(1536, 28672, 4096, Precision::kFP8Tensorwise) ==
        Close(fp8 * p.GemmFlopsPerS(1536, 28672, 4096, Precision::kFP8Tensorwise)));
  CHECK(s.GroupedGemmFlopsPerS(8, 256, 7168, 4096) ==
        Close(bf16 * p.GroupedGemmFlopsPerS(8, 256, 7168, 4096)));
  for (AttentionBackend b : {AttentionBackend::kTeCudnn, AttentionBackend::kFlash2, AttentionBackend::kFlash3}) {
    const AttentionKernel k{8192, 32, 32, 128, 128, true};
    CHECK(s.AttentionFlopsPerS(b, k, true) == Close(bf16 * p.AttentionFlopsPerS(b, k, true)));
  }
  CHECK(s.copy_gb_per_s() == Close(hbm * p.copy_gb_per_s()));
  CHECK(s.PermuteGbPerS(1e8) == Close(hbm * p.PermuteGbPerS(1e8)));
  // Scaling is relative to the profiled GPU: it does not compound.
  CHECK(s.ScaledTo(big).copy_gb_per_s() == s.copy_gb_per_s());

  // An H100 (989 bf16, 3.35 TB/s) keeps GEMM rates and gets 3.35/4.8 of the copy rate.
  const ClusterSpec h100 = testing::MakeCluster(1);  // no FP8 peak set: FP8 runs as BF16
  GpuSpec h100_gpu = h100.gpu;
  h100_gpu.hbm_tb_per_s = 3.35;
  const ComputeProfile h = p.ScaledTo(h100_gpu);
  CHECK(h.GemmFlopsPerS(1024, 28672, 4096, Precision::kBF16) == Close(771.7622443475088 * T));
  CHECK(h.GemmFlopsPerS(1024, 28672, 4096, Precision::kFP8Tensorwise) == Close(771.7622443475088 * T));
  CHECK(h.copy_gb_per_s() == Close(4224.003837367019 * 3.35 / 4.8));
}

TEST_CASE("a bad field is an error naming the file and JSON pointer") {
  nlohmann::json j = H200Json();
  j["gemm_bf16"][3]["tflops"] = "fast";
  auto bad = ComputeProfile::Parse(j, "x.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "x.json: /gemm_bf16/3/tflops: expected a number in [1e-12, 1e+09], found the string \"fast\"");

  j = H200Json();
  j["attention"][0]["heads"] = -1;
  j["attention"][1]["flavour"] = "sweet";
  j["speed"] = 1;
  bad = ComputeProfile::Parse(j, "x.json");
  REQUIRE_FALSE(bad.ok());
  const std::string message = bad.status().message();
  CHECK(message.find("x.json: /speed: unknown field") != std::string::npos);
  CHECK(message.find("x.json: /attention/0/heads: expected an integer in [1, 1048576], found -1") !=
        std::string::npos);
  CHECK(message.find("x.json: /attention/1/flavour: unknown field") != std::string::npos);

  j = H200Json();
  j.erase("attention");
  bad = ComputeProfile::Parse(j, "x.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "x.json: /attention: missing; expected a non-empty list of objects");

  j = H200Json();
  j["schema"] = "foldplan.model/v1";
  bad = ComputeProfile::Parse(j, "x.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "x.json: /schema: expected \"foldplan.compute-profile/v1\", found the string \"foldplan.model/v1\"");
}

// ---- compute times ------------------------------------------------------

namespace {

struct ModelSetup {
  ModelSpec model;
  JobSpec job;
  CostContext ctx;
  ModelSetup(const char* name, double imbalance = 1.0) : model(ShippedModel(name)) {
    job.seq_len = 4096;
    job.routing_imbalance = imbalance;
    ctx.model = &model;
    ctx.job = &job;
    ctx.profile = &H200();
  }
};

Layout ComputeLayout(int tp, int cp, int ep, Recompute recompute = Recompute::None()) {
  Layout l;
  l.tp = tp;
  l.cp = cp;
  l.ep = ep;
  l.recompute = recompute;
  return l;
}

}  // namespace

TEST_CASE("GEMM parts: forward = FLOPs / rate at the shape, backward = 2 x forward") {
  // llama3-70b, tp 8: the fused QKV GEMM is [4096, 8192] x [8192, (64 + 16)
  // x 128 / 8 = 1280], o is [4096, 1024] x [1024, 8192]; the MLP up
  // [4096, 8192] x [8192, 2 x 28672 / 8], down [4096, 3584] x [3584, 8192].
  ModelSetup s("llama3-70b");
  const ComputeProfile& p = H200();
  const ComputeTimes t = ComputeLayerTimes(ComputeLayout(8, 1, 1), s.ctx);
  const double qkv = 2.0 * 4096 * 1280 * 8192, o = 2.0 * 4096 * 8192 * 1024;
  const double qkv_s = qkv / p.GemmFlopsPerS(4096, 1280, 8192, Precision::kBF16);
  const double o_s = o / p.GemmFlopsPerS(4096, 8192, 1024, Precision::kBF16);
  CHECK(t.dense_layer.attention_projections.fwd_flops == qkv + o);
  CHECK(t.dense_layer.attention_projections.fwd_s == Close(qkv_s + o_s));
  CHECK(t.dense_layer.attention_projections.bwd_s == Close(2 * (qkv_s + o_s)));
  const double up = 2.0 * 4096 * 7168 * 8192, down = 2.0 * 4096 * 8192 * 3584;
  const double mlp_s = up / p.GemmFlopsPerS(4096, 7168, 8192, Precision::kBF16) +
                       down / p.GemmFlopsPerS(4096, 8192, 3584, Precision::kBF16);
  CHECK(t.dense_layer.mlp.fwd_s == Close(mlp_s));
  CHECK(t.dense_layer.mlp.bwd_s == Close(2 * mlp_s));
  CHECK(t.moe_layer.fwd_s() == 0);  // dense model
}

TEST_CASE("attention core: backward is the measured forward+backward time less the forward") {
  // llama3-70b, tp 8: 8 heads of 128 over 4096 tokens (GQA 1 KV head per rank);
  // F = 8 x 4096^2 x 256. fwd = F / r_fwd; fwd+bwd = 3.5 F / r_fb, the job's
  // backend's rates (te-cudnn, the default).
  ModelSetup s("llama3-70b");
  const ComputeProfile& p = H200();
  REQUIRE(s.job.attention_backend == AttentionBackend::kTeCudnn);
  const ComputeTimes t = ComputeLayerTimes(ComputeLayout(8, 1, 1), s.ctx);
  const double f = 8.0 * 4096 * 4096 * 256;
  const AttentionKernel k{4096, 8, 1, 128, 128, true};
  const double fwd_s = f / p.AttentionFlopsPerS(AttentionBackend::kTeCudnn, k, false);
  const double both_s = 3.5 * f / p.AttentionFlopsPerS(AttentionBackend::kTeCudnn, k, true);
  CHECK(t.dense_layer.attention_core.fwd_flops == f);
  CHECK(t.dense_layer.attention_core.fwd_s == Close(fwd_s));
  CHECK(t.dense_layer.attention_core.bwd_s == Close(both_s - fwd_s));
  CHECK(t.dense_layer.attention_core.bwd_flops() == 2 * f);
}

TEST_CASE("recomputation adds exactly the layer forward (full) or the attention core (selective)") {
  ModelSetup s("mixtral-8x7b");
  const ComputeTimes none = ComputeLayerTimes(ComputeLayout(2, 1, 8, Recompute::None()), s.ctx);
  const ComputeTimes sel = ComputeLayerTimes(ComputeLayout(2, 1, 8, Recompute::Selective()), s.ctx);
  const ComputeTimes full = ComputeLayerTimes(ComputeLayout(2, 1, 8, Recompute::Full()), s.ctx);
  CHECK(none.moe_layer.recompute_s == 0);
  CHECK(none.moe_layer.recompute_flops == 0);
  CHECK(sel.moe_layer.recompute_s == none.moe_layer.attention_core.fwd_s);
  CHECK(sel.moe_layer.recompute_flops == none.moe_layer.attention_core.fwd_flops);
  CHECK(full.moe_layer.recompute_s == none.moe_layer.fwd_s());
  CHECK(full.moe_layer.recompute_flops == none.moe_layer.fwd_flops());
  // Recomputation changes nothing else.
  CHECK(full.moe_layer.fwd_s() == none.moe_layer.fwd_s());
  CHECK(full.moe_layer.bwd_s() == none.moe_layer.bwd_s());
}

TEST_CASE("routed experts: grouped GEMM at rows / local experts on the busiest rank") {
  // deepseek-v3, tp 1, ep 8, imbalance 1.2: T = 4096, 32 local experts, rows
  // = 4096 x 8 x 1.2 = 39321.6, 1228.8 per expert. up: K 7168, N 4096;
  // down: K 2048, N 7168.
  ModelSetup s("deepseek-v3", 1.2);
  const ComputeProfile& p = H200();
  const ComputeTimes t = ComputeLayerTimes(ComputeLayout(1, 1, 8), s.ctx);
  const double rows = 4096 * 8 * 1.2 / 32;
  const double up = 2 * 32 * rows * 4096 * 7168, down = 2 * 32 * rows * 7168 * 2048;
  const double fwd_s = up / p.GroupedGemmFlopsPerS(32, rows, 7168, 4096) +
                       down / p.GroupedGemmFlopsPerS(32, rows, 2048, 7168);
  CHECK(t.moe_layer.routed_experts.fwd_flops == Close(up + down));
  CHECK(t.moe_layer.routed_experts.fwd_s == Close(fwd_s));
  CHECK(t.moe_layer.routed_experts.bwd_s == Close(2 * fwd_s));
  // The imbalance multiplies the FLOPs exactly; the time follows the rate
  // at the larger row count, which need not be higher (32 experts of this
  // shape: 674 TFLOP/s at 1024 rows, 653 at 4096).
  ModelSetup even("deepseek-v3", 1.0);
  const ComputeTimes e = ComputeLayerTimes(ComputeLayout(1, 1, 8), even.ctx);
  CHECK(t.moe_layer.routed_experts.fwd_flops == Close(1.2 * e.moe_layer.routed_experts.fwd_flops));
  CHECK(t.moe_layer.routed_experts.fwd_s > e.moe_layer.routed_experts.fwd_s);
}

TEST_CASE("embedding and output layer: memory traffic, the final norm and the logits GEMM") {
  // llama3-70b, tp 4, mbs 1: 4096 tokens, 32064 vocab rows per rank.
  // Embedding fwd 4 x 4096 x 8192 bytes; bwd 6 x 4096 x 8192 + 12 x 32064 x 8192.
  // Output: the final RMSNorm on the T = 4096 / 4 = 1024 sequence-parallel
  // rows (4 bytes per element forward, 6 backward, x 1024 x 8192), the GEMM
  // 2 x 4096 x 8192 x 32064 (bf16) and the loss, 38 (fwd) / 14 (bwd) bytes
  // per logit, over the copy bandwidth.
  ModelSetup s("llama3-70b");
  const ComputeProfile& p = H200();
  const double bw = p.copy_gb_per_s() * 1e9;
  const ComputeTimes t = ComputeLayerTimes(ComputeLayout(4, 1, 1), s.ctx);
  CHECK(t.embedding.fwd_flops == 0);
  CHECK(t.embedding.fwd_s == Close(4.0 * 4096 * 8192 / bw));
  CHECK(t.embedding.bwd_s == Close((6.0 * 4096 * 8192 + 12.0 * 32064 * 8192) / bw));
  const double gemm = 2.0 * 4096 * 8192 * 32064;
  const double gemm_s = gemm / p.GemmFlopsPerS(4096, 32064, 8192, Precision::kBF16);
  CHECK(t.output_layer.fwd_flops == gemm);
  const double norm = 1024.0 * 8192;
  CHECK(t.output_layer.fwd_s == Close(gemm_s + (4 * norm + 38.0 * 4096 * 32064) / bw));
  CHECK(t.output_layer.bwd_s == Close(2 * gemm_s + (6 * norm + 14.0 * 4096 * 32064) / bw));
}

TEST_CASE("FP8 jobs use FP8 rates for projections, MLPs and experts only") {
  ModelSetup s("mixtral-8x7b");
  Layout fp8 = ComputeLayout(1, 1, 8);
  fp8.precision = Precision::kFP8Tensorwise;
  const ComputeTimes bf = ComputeLayerTimes(ComputeLayout(1, 1, 8), s.ctx);
  const ComputeTimes fp = ComputeLayerTimes(fp8, s.ctx);
  CHECK(fp.moe_layer.attention_projections.fwd_s < bf.moe_layer.attention_projections.fwd_s);
  CHECK(fp.moe_layer.routed_experts.fwd_s < bf.moe_layer.routed_experts.fwd_s);
  CHECK(fp.moe_layer.attention_core.fwd_s == bf.moe_layer.attention_core.fwd_s);
  CHECK(fp.moe_layer.router.fwd_s == bf.moe_layer.router.fwd_s);
  CHECK(fp.output_layer.fwd_s == bf.output_layer.fwd_s);
  CHECK(fp.moe_layer.fwd_flops() == bf.moe_layer.fwd_flops());
  // The memory-bound passes other than the casts do not depend on precision.
  CHECK(fp.moe_layer.permute.fwd_s == bf.moe_layer.permute.fwd_s);
  CHECK(fp.moe_layer.expert_activation.bwd_s == bf.moe_layer.expert_activation.bwd_s);
  CHECK(bf.moe_layer.fp8_casts.fwd_s == 0);
  CHECK(fp.moe_layer.fp8_casts.fwd_s > 0);
}

TEST_CASE("a mixtral MoE layer on an H200 runs at a plausible fraction of peak") {
  // Not a measurement: a guard against unit slips. Forward over tp 1, ep 8,
  // 4096 tokens (GEMMs and the memory-bound passes) should land between 40%
  // and 80% of the 989 TFLOP/s peak.
  ModelSetup s("mixtral-8x7b");
  const ComputeTimes t = ComputeLayerTimes(ComputeLayout(1, 1, 8), s.ctx);
  const double achieved = t.moe_layer.fwd_flops() / t.moe_layer.fwd_s();
  MESSAGE("mixtral MoE layer forward: " << achieved / T << " TFLOP/s, " << t.moe_layer.fwd_s() * 1e3
                                        << " ms");
  CHECK(achieved > 0.4 * 989 * T);
  CHECK(achieved < 0.8 * 989 * T);
}

TEST_CASE("optimizer step: 38 bytes per fp32 master element over the copy bandwidth") {
  // 1e9 elements on the rank: 38e9 bytes / 4224.0 GB/s = 8.996 ms.
  const double s = OptimizerStepSeconds(1e9, H200());
  CHECK(s == Close(38e9 / (4224.003837367019e9)));
  CHECK(s == doctest::Approx(0.008996).epsilon(1e-3));
}
