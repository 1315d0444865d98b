// The attention kernel that runs: a rate table per backend (te-cudnn's
// cuDNN points, flash2's FlashAttention-2 points, flash3 derived from
// them), causal and non-causal, with MLA's head dims; lookups below the
// shortest measured sequence; and ring CP priced per step with Transformer
// Engine's per-step corrections. Each case states the rule, then asserts
// the number it implies from data/compute/h200.json (rates quoted from it
// in TFLOP/s). doc/cost-model-compute.md (§5 "Lookup rules", §6 "Ring CP").
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/json_check.h"
#include "costmodel/compute_profile.h"
#include "costmodel/compute_time.h"
#include "costmodel/cost_context.h"
#include "costmodel/flops.h"
#include "costmodel_compute_fixtures.h"
#include "shipped_model.h"
#include "tests/fixtures.h"

using namespace foldplan;

namespace attention_test {

using testing::Close;
using testing::H200;

constexpr double kT = 1e12;  // TFLOP/s
constexpr AttentionBackend kCudnn = AttentionBackend::kTeCudnn;
constexpr AttentionBackend kFa2 = AttentionBackend::kFlash2;
constexpr AttentionBackend kFa3 = AttentionBackend::kFlash3;

AttentionKernel Kernel(double seq, int heads, int kv_heads, bool causal = true, int d_qk = 128, int d_v = 128) {
  return AttentionKernel{seq, heads, kv_heads, d_qk, d_v, causal};
}

nlohmann::json ProfileJson() {
  auto j = ParseJsonFile(testing::kH200Profile);
  REQUIRE(j.ok());
  return j.value();
}

ComputeProfile Parsed(const nlohmann::json& j) {
  auto p = ComputeProfile::Parse(j, "x.json");
  REQUIRE_MESSAGE(p.ok(), p.status().message());
  return p.value();
}

std::string ParseError(const nlohmann::json& j) {
  auto p = ComputeProfile::Parse(j, "x.json");
  REQUIRE_FALSE(p.ok());
  return p.status().message();
}

// A model timed with one attention backend, S 4096, mbs 1, balanced routing.
struct AttentionSetup {
  ModelSpec model;
  JobSpec job;
  CostContext ctx;
  AttentionSetup(const char* name, AttentionBackend backend, int seq = 4096)
      : model(testing::ShippedModel(name)) {
    job.seq_len = seq;
    job.routing_imbalance = 1;
    job.attention_backend = backend;
    ctx.model = &model;
    ctx.job = &job;
    ctx.profile = &H200();
  }
};

Layout AttentionLayout(int tp, int cp, CpStyle style) {
  Layout l;
  l.tp = tp;
  l.cp = cp;
  l.ep = 1;
  l.cp_style = style;
  l.mbs = 1;
  l.recompute = Recompute::None();
  return l;
}

}  // namespace attention_test

using namespace attention_test;

TEST_CASE("te-cudnn reads the cuDNN table, flash2 the FlashAttention-2 table") {
  const ComputeProfile& p = H200();
  // 32 query heads, 8 KV heads, d 128, S 4096, causal: cuDNN forward
  // 525.09, forward + backward 449.43; FlashAttention-2 274.98 and 238.83.
  CHECK(p.AttentionFlopsPerS(kCudnn, Kernel(4096, 32, 8), false) == Close(525.0892374799635 * kT));
  CHECK(p.AttentionFlopsPerS(kCudnn, Kernel(4096, 32, 8), true) == Close(449.4322563106584 * kT));
  CHECK(p.AttentionFlopsPerS(kFa2, Kernel(4096, 32, 8), false) == Close(274.98350141258464 * kT));
  CHECK(p.AttentionFlopsPerS(kFa2, Kernel(4096, 32, 8), true) == Close(238.8329636979935 * kT));
  CHECK(p.MeasuredAttention(kCudnn));
  CHECK(p.MeasuredAttention(kFa2));
  CHECK_FALSE(p.MeasuredAttention(kFa3));
}

TEST_CASE("flash3 is FlashAttention-2's rate x 1.5, forward and backward") {
  // kFlash3OverFlash2 = 1.5, the lower bound of FlashAttention-3's stated
  // speed-up (arXiv 2407.08608: 1.5-2.0x forward, 1.5-1.75x backward).
  const ComputeProfile& p = H200();
  CHECK(kFlash3OverFlash2 == 1.5);
  for (bool fwd_bwd : {false, true}) {
    for (const AttentionKernel& k : {Kernel(4096, 32, 8), Kernel(1024, 64, 8, false), Kernel(300, 4, 1)}) {
      CHECK(p.AttentionFlopsPerS(kFa3, k, fwd_bwd) == Close(1.5 * p.AttentionFlopsPerS(kFa2, k, fwd_bwd)));
    }
  }
  // At the measured point above: 1.5 x 274.98 = 412.48 forward.
  CHECK(p.AttentionFlopsPerS(kFa3, Kernel(4096, 32, 8), false) == Close(1.5 * 274.98350141258464 * kT));
}

TEST_CASE("a profile without attention_cudnn times te-cudnn on its attention list") {
  nlohmann::json j = ProfileJson();
  j.erase("attention_cudnn");
  const ComputeProfile p = Parsed(j);
  CHECK_FALSE(p.MeasuredAttention(kCudnn));
  CHECK(p.AttentionFlopsPerS(kCudnn, Kernel(4096, 32, 8), false) == Close(274.98350141258464 * kT));
  CHECK(p.AttentionFlopsPerS(kCudnn, Kernel(4096, 32, 8), true) ==
        p.AttentionFlopsPerS(kFa2, Kernel(4096, 32, 8), true));
}

TEST_CASE("non-causal kernels read the non-causal points, else the causal ones at the same length") {
  const ComputeProfile& p = H200();
  // 32 / 8 heads over a 4096 x 4096 block, no mask: FlashAttention-2
  // 351.53 forward (the causal kernel of that length: 274.98), cuDNN 665.06.
  CHECK(p.AttentionFlopsPerS(kFa2, Kernel(4096, 32, 8, false), false) == Close(351.52785485205595 * kT));
  CHECK(p.AttentionFlopsPerS(kCudnn, Kernel(4096, 32, 8, false), false) == Close(665.0615151214112 * kT));
  CHECK(p.AttentionFlopsPerS(kCudnn, Kernel(4096, 32, 8, false), true) == Close(572.7823237637014 * kT));
  // A profile with no non-causal point: the causal rate at that length.
  nlohmann::json j = ProfileJson();
  for (const char* key : {"attention", "attention_cudnn"}) {
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& e : j[key]) {
      if (e["causal"].get<bool>()) kept.push_back(e);
    }
    j[key] = kept;
  }
  const ComputeProfile causal_only = Parsed(j);
  CHECK(causal_only.AttentionFlopsPerS(kFa2, Kernel(4096, 32, 8, false), false) == Close(274.98350141258464 * kT));
  CHECK(causal_only.AttentionFlopsPerS(kCudnn, Kernel(4096, 32, 8, false), false) ==
        Close(525.0892374799635 * kT));
}

TEST_CASE("MLA head dims: cuDNN's measured 192 / 128 points; flash tables have d 128 only") {
  const ComputeProfile& p = H200();
  // 128 heads, d_qk 192, d_v 128, S 4096, causal: cuDNN 605.38 forward,
  // 452.06 forward + backward (FLOPs heads S^2 (192 + 128)).
  CHECK(p.AttentionFlopsPerS(kCudnn, Kernel(4096, 128, 128, true, 192, 128), false) ==
        Close(605.3768817485854 * kT));
  CHECK(p.AttentionFlopsPerS(kCudnn, Kernel(4096, 128, 128, true, 192, 128), true) ==
        Close(452.06238122950475 * kT));
  // The d 128 shape of 128 / 128 heads gives 602.87 and 496.40: the
  // measured MLA point is the nearer (log distance 0 against log 1.5).
  CHECK(p.AttentionFlopsPerS(kCudnn, Kernel(4096, 128, 128), false) == Close(602.8658823182265 * kT));
  CHECK(p.AttentionFlopsPerS(kCudnn, Kernel(4096, 128, 128), true) == Close(496.40094238628683 * kT));
  // FlashAttention-2 has no such point (it refuses q/k and v of different
  // widths): flash3's MLA rate is 1.5 x the nearest d 128 curve's (326.37).
  CHECK(p.AttentionFlopsPerS(kFa3, Kernel(4096, 128, 128, true, 192, 128), false) ==
        Close(1.5 * 326.37149538479764 * kT));
}

TEST_CASE("below the shortest measured length the rate follows the table's own log-log slope") {
  const ComputeProfile& p = H200();
  // FlashAttention-2, 32 / 8 heads: 96.145 at S 512, 158.462 at 1024, so
  // k = log(158.462 / 96.145) / log 2 = 0.7208; at 256: 96.145 x 2^-0.7208
  // = 58.33 (the rate held would be 96.1).
  const double k = std::log(158.46249094937477 / 96.14450181597446) / std::log(2.0);
  CHECK(k == doctest::Approx(0.7208).epsilon(1e-3));
  CHECK(p.AttentionFlopsPerS(kFa2, Kernel(256, 32, 8), false) == Close(96.14450181597446 * std::pow(0.5, k) * kT));
  CHECK(p.AttentionFlopsPerS(kFa2, Kernel(256, 32, 8), false) == doctest::Approx(58.334 * kT).epsilon(1e-4));
  // 16 / 8 heads was measured from 2048 on (166.834, then 215.168 at 4096):
  // k = 0.3671, so a 1024-token kernel runs at 166.834 x 2^-0.3671 = 129.36,
  // not at the 2048 rate.
  const double k16 = std::log(215.1679377584547 / 166.8337174084093) / std::log(2.0);
  CHECK(p.AttentionFlopsPerS(kFa2, Kernel(1024, 16, 8), false) ==
        Close(166.8337174084093 * std::pow(0.5, k16) * kT));
  CHECK(p.AttentionFlopsPerS(kFa2, Kernel(1024, 16, 8), false) == doctest::Approx(129.357 * kT).epsilon(1e-4));
  // The slope is taken within [0, 2]. A profile whose 64 / 8 cuDNN curve
  // rises from 10 at 512 to 80 at 1024 (a slope of 3): taken as 2, the
  // time held, so a 256-token kernel (a quarter of the work) takes as long
  // as the 512-token one: rate 10 / 4. One falling from 200 to 100 (a
  // slope of -1): taken as 0, the rate held at 200.
  nlohmann::json j = ProfileJson();
  auto set = [&](int seq, double fwd) {
    for (auto& e : j["attention_cudnn"]) {
      if (e["heads"] == 64 && e["kv_heads"] == 8 && e["S"] == seq && e["causal"] == true) e["fwd_tflops"] = fwd;
    }
  };
  set(512, 10);
  set(1024, 80);
  const ComputeProfile steep = Parsed(j);
  CHECK(steep.AttentionFlopsPerS(kCudnn, Kernel(256, 64, 8), false) == Close(10.0 / 4 * kT));
  const double work_512 = 64.0 * 512 * 512 * 256, work_256 = work_512 / 4;
  CHECK(work_256 / steep.AttentionFlopsPerS(kCudnn, Kernel(256, 64, 8), false) ==
        Close(work_512 / steep.AttentionFlopsPerS(kCudnn, Kernel(512, 64, 8), false)));
  set(512, 200);
  set(1024, 100);
  CHECK(Parsed(j).AttentionFlopsPerS(kCudnn, Kernel(256, 64, 8), false) == Close(200 * kT));
}

TEST_CASE("fewer heads than measured: the shorter equal grid, never slower than the measured heads' kernel") {
  const ComputeProfile& p = H200();
  // 4 / 4 heads (nearest measured: 8 / 8). FlashAttention-2 at S 4096: the
  // grid of 8 heads at 2048, (134.96 + 133.25) / 2 = 134.11, above half of
  // 8 heads at 4096 ((173.81 + 171.35) / 4 = 86.29): 134.11.
  CHECK(p.AttentionFlopsPerS(kFa2, Kernel(4096, 4, 4), false) ==
        Close((134.9600072818804 + 133.25165532613792) / 2 * kT));
  // cuDNN at S 1024: 8 heads at 512 run at 40.23, below half of 8 heads at
  // 1024, 107.89 / 2 = 53.95, which does twice the work: 53.95, so 4 heads
  // take no longer than 8.
  CHECK(p.AttentionFlopsPerS(kCudnn, Kernel(1024, 4, 4), false) ==
        Close(p.AttentionFlopsPerS(kCudnn, Kernel(1024, 8, 8), false) / 2));
  CHECK(p.AttentionFlopsPerS(kCudnn, Kernel(1024, 4, 4), false) == Close(107.89206059762111 / 2 * kT));
}

TEST_CASE("the rate memo keys the backend, causality and both head dims") {
  const ComputeProfile& p = H200();
  ComputeRateMemo memo;
  // Asked in turn at one (seq, heads, kv_heads): each answer is its own
  // lookup's, not the first one's.
  const AttentionKernel causal = Kernel(4096, 32, 8), full = Kernel(4096, 32, 8, false),
                        mla = Kernel(4096, 32, 8, true, 192, 128);
  for (int round = 0; round < 2; ++round) {
    for (AttentionBackend b : {kCudnn, kFa2, kFa3}) {
      for (const AttentionKernel& k : {causal, full, mla}) {
        CHECK(memo.AttentionFlopsPerS(p, b, k, false) == p.AttentionFlopsPerS(b, k, false));
      }
    }
  }
  CHECK(memo.size() == 9);
  CHECK(p.AttentionFlopsPerS(kCudnn, causal, false) != p.AttentionFlopsPerS(kFa2, causal, false));
  CHECK(p.AttentionFlopsPerS(kFa2, causal, false) != p.AttentionFlopsPerS(kFa2, full, false));
}

TEST_CASE("attention lists: d_v, date and causality checked by pointer") {
  nlohmann::json j = ProfileJson();
  j["attention_cudnn"][3]["d_v"] = 0;
  j["attention_cudnn"][4]["date"] = 7;
  j["attention"][0]["flavour"] = "sweet";
  const std::string message = ParseError(j);
  CHECK(message.find("x.json: /attention_cudnn/3/d_v: expected an integer in [1, 1048576], found 0") !=
        std::string::npos);
  CHECK(message.find("x.json: /attention_cudnn/4/date: expected a string") != std::string::npos);
  CHECK(message.find("x.json: /attention/0/flavour: unknown field") != std::string::npos);
  // A list of non-causal points only has nothing for the causal kernels.
  j = ProfileJson();
  nlohmann::json full = nlohmann::json::array();
  for (const auto& e : j["attention_cudnn"]) {
    if (!e["causal"].get<bool>()) full.push_back(e);
  }
  j["attention_cudnn"] = full;
  CHECK(ParseError(j) == "x.json: /attention_cudnn: expected at least one causal entry");
  j["attention_cudnn"] = nlohmann::json::array();
  CHECK(ParseError(j).find("x.json: /attention_cudnn: expected a non-empty list of objects, found") == 0);
  // d_v defaults to d: the same rates without the field where it equals d.
  j = ProfileJson();
  for (const char* key : {"attention", "attention_cudnn"}) {
    for (auto& e : j[key]) {
      if (e["d_v"] == e["d"]) e.erase("d_v");
    }
  }
  const ComputeProfile without = Parsed(j);
  for (AttentionBackend b : {kCudnn, kFa2}) {
    CHECK(without.AttentionFlopsPerS(b, Kernel(4096, 32, 8), false) ==
          H200().AttentionFlopsPerS(b, Kernel(4096, 32, 8), false));
  }
}

TEST_CASE("ring CP: one causal step and cp - 1 non-causal steps, each priced on its own block") {
  // llama3-70b, tp 8, ring cp 4, S 4096: each rank's block is L = 1024
  // tokens of 8 query heads and 1 KV head, d 128. The causal work on the
  // rank is 8 x 4096^2 x 256 / 4 = 8.59e9 FLOPs (the cp = 1 figure / cp),
  // F = 8 x 1024^2 x 256 = 2.147e9 per step:
  //   step 0: causal over L;
  //   steps 1-3: non-causal L x L/2 or L/2 x L, at the equal-work square's
  //   side L / sqrt 2 = 724.1 (8 heads x 724.1^2 x 512 = F);
  // forward = F / r_c(L) + 3 F / r_n(724.1) + corrections, backward likewise
  // with 3.5 F / r_fb - F / r_f per step.
  AttentionSetup s("llama3-70b", kCudnn);
  const ComputeProfile& p = H200();
  const LayerWork w = LayerForwardWork(s.model, s.job, AttentionLayout(8, 4, CpStyle::kRing), false);
  CHECK(w.core.ring_steps == 4);
  CHECK(w.core.seq == 1024);
  const double f = 8.0 * 1024 * 1024 * 256;
  CHECK(w.core.flops == 4 * f);
  const AttentionKernel diag = Kernel(1024, 8, 1), off = Kernel(1024 / std::sqrt(2.0), 8, 1, false);
  CHECK(8 * off.seq * off.seq * 512 == Close(f));  // the square does F non-causal
  const RingCorrectionBytes bytes = RingCorrectionBytesOf(w.core);
  const double fwd = f / p.AttentionFlopsPerS(kCudnn, diag, false) + 3 * f / p.AttentionFlopsPerS(kCudnn, off, false) +
                     bytes.fwd / testing::kBw;
  const double bwd = (3.5 * f / p.AttentionFlopsPerS(kCudnn, diag, true) - f / p.AttentionFlopsPerS(kCudnn, diag, false)) +
                     3 * (3.5 * f / p.AttentionFlopsPerS(kCudnn, off, true) -
                          f / p.AttentionFlopsPerS(kCudnn, off, false)) +
                     bytes.bwd / testing::kBw;
  const ComputeTimes t = ComputeLayerTimes(AttentionLayout(8, 4, CpStyle::kRing), s.ctx);
  CHECK(t.dense_layer.attention_core.fwd_flops == 4 * f);
  CHECK(t.dense_layer.attention_core.fwd_s == Close(fwd));
  CHECK(t.dense_layer.attention_core.bwd_s == Close(bwd));
  // The old pricing, one causal kernel at L for all 4F, is not what runs.
  CHECK(t.dense_layer.attention_core.fwd_s != Close(4 * f / p.AttentionFlopsPerS(kCudnn, diag, false)));
  // Ulysses keeps one causal kernel over S for its heads / cp (2 heads, 1 KV).
  const ComputeTimes u = ComputeLayerTimes(AttentionLayout(8, 4, CpStyle::kUlysses), s.ctx);
  CHECK(u.dense_layer.attention_core.fwd_s == Close(4 * f / p.AttentionFlopsPerS(kCudnn, Kernel(4096, 2, 1), false)));
}

TEST_CASE("ring CP corrections: bytes per step, forward and backward") {
  // The same block: R = 8 query heads x L 1024 = 8192 query rows, 1 KV
  // head x 1024 = 1024 KV rows, d_qk = d_v = 128, cp = 4 steps.
  // Forward (rank cp - 1 merges L query rows every step):
  //   outputs: 8192 x 128 x (4 for the first step + 3 x 6) = 23,068,672
  //   rows:    8192 x (8 LSE copy + 4 x 8 LSE reads + 3 x 12 LSE merges)
  //            = 8192 x 76 = 622,592
  //   total 23,691,264 bytes: 5.61 us at 4224 GB/s.
  // Backward: dq 8192 x 128 = 1,048,576 elements, dK + dV 1024 x 256 =
  // 262,144; the first step copies both, 4 x 1,310,720 = 5,242,880; each
  // other step adds the busier orientation, max(dq + dkv / 2, dq / 2 + dkv)
  // = 1,179,648 elements x 6 bytes x 3 steps = 21,233,664; total
  // 26,476,544 bytes.
  AttentionSetup s("llama3-70b", kCudnn);
  const LayerWork w = LayerForwardWork(s.model, s.job, AttentionLayout(8, 4, CpStyle::kRing), false);
  const RingCorrectionBytes b = RingCorrectionBytesOf(w.core);
  CHECK(b.fwd == 23691264.0);
  CHECK(b.bwd == 26476544.0);
  CHECK(b.fwd / testing::kBw == doctest::Approx(5.609e-6).epsilon(1e-3));
  // No ring, no corrections.
  const LayerWork u = LayerForwardWork(s.model, s.job, AttentionLayout(8, 4, CpStyle::kUlysses), false);
  CHECK(RingCorrectionBytesOf(u.core).fwd == 0);
  CHECK(RingCorrectionBytesOf(u.core).bwd == 0);
  // MLA: per-head keys and values after kv_b (a_kv = a) of d_qk 192 and
  // d_v 128, so the KV side is the busier orientation in backward.
  // deepseek-v3, tp 8, ring cp 4, S 4096: 16 heads, L 1024; dq = 16 x 1024
  // x 192 = 3,145,728, dkv = 16 x 1024 x 320 = 5,242,880; max(dq + dkv / 2
  // = 5,767,168, dq / 2 + dkv = 6,815,744) = 6,815,744; backward = 4 x
  // 8,388,608 + 3 x 6 x 6,815,744 = 156,237,824 bytes. Forward: 16,384
  // query rows x (128 x 22 + 76) = 47,382,528.
  AttentionSetup m("deepseek-v3", kCudnn);
  const LayerWork mw = LayerForwardWork(m.model, m.job, AttentionLayout(8, 4, CpStyle::kRing), true);
  CHECK(RingCorrectionBytesOf(mw.core).bwd == 156237824.0);
  CHECK(RingCorrectionBytesOf(mw.core).fwd == 47382528.0);
}

TEST_CASE("the job's backend times the attention core; the recomputed core reruns its corrections") {
  // deepseek-v3 (MLA, 128 heads, d_qk 192, d_v 128), tp 8, cp 1: 16 heads
  // over 4096 tokens; te-cudnn reads cuDNN's 16 / 16 MLA point (456.10
  // forward), flash3 1.5 x FlashAttention-2's nearest d 128 curve.
  AttentionSetup cudnn("deepseek-v3", kCudnn);
  AttentionSetup fa3("deepseek-v3", kFa3);
  const Layout l = AttentionLayout(8, 1, CpStyle::kUlysses);
  const double f = 16.0 * 4096 * 4096 * (192 + 128);
  const ComputeTimes c = ComputeLayerTimes(l, cudnn.ctx);
  CHECK(c.moe_layer.attention_core.fwd_s == Close(f / (456.0962640707551 * kT)));
  const ComputeTimes t3 = ComputeLayerTimes(l, fa3.ctx);
  CHECK(t3.moe_layer.attention_core.fwd_s ==
        Close(f / (1.5 * H200().AttentionFlopsPerS(kFa2, Kernel(4096, 16, 16, true, 192, 128), false))));
  // Recomputing core_attn reruns the ring core's forward, corrections included.
  AttentionSetup ring("llama3-70b", kFa2);
  Layout r = AttentionLayout(8, 4, CpStyle::kRing);
  r.recompute = Recompute::Selective();
  const ComputeTimes rt = ComputeLayerTimes(r, ring.ctx);
  CHECK(rt.dense_layer.recompute_s == rt.dense_layer.attention_core.fwd_s);
}
