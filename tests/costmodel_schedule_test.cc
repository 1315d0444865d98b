// The analytical pipeline schedule (costmodel/schedule.h) on step work
// built by hand: each case states the formula, then the number it implies.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "costmodel/schedule.h"
#include "costmodel/schedule_bound.h"
#include "seeded_draws.h"

using namespace foldplan;

namespace {

double Inflight(int pp, int vpp, int stage, long long m) {
  return InflightMicrobatches(vpp > 1 ? PipelineSchedule::kInterleaved1F1B : PipelineSchedule::k1F1B, pp, vpp,
                              stage, m);
}

}  // namespace

TEST_CASE("1F1B and interleaved micro-batches in flight") {
  // 1F1B: min(pp - stage, m).
  CHECK(Inflight(8, 1, 0, 64) == 8);
  CHECK(Inflight(8, 1, 5, 64) == 3);
  CHECK(Inflight(8, 1, 7, 64) == 1);
  CHECK(Inflight(8, 1, 0, 4) == 4);
  CHECK(Inflight(1, 1, 0, 64) == 1);
  // Interleaved, first stage: pp x (1 + (pp - 1) / (pp x vpp)).
  for (int pp : {2, 4, 8, 16}) {
    for (int vpp : {2, 3, 4}) {
      CAPTURE(pp);
      CAPTURE(vpp);
      const double formula = pp * (1 + double(pp - 1) / (pp * vpp));
      CHECK(Inflight(pp, vpp, 0, 1024) == doctest::Approx(formula));
      // Later stages hold fewer; the last holds ((vpp - 1) pp + 1) / vpp.
      CHECK(Inflight(pp, vpp, pp - 1, 1024) ==
            doctest::Approx(((vpp - 1.0) * pp + 1) / vpp));
      for (int s = 1; s < pp; ++s) {
        CHECK(Inflight(pp, vpp, s, 1024) <
              Inflight(pp, vpp, s - 1, 1024));
      }
    }
  }
  // m == pp: Megatron runs every chunk's forward first: all m micro-batches.
  CHECK(Inflight(4, 2, 0, 4) == 4);
}


namespace {

CommOp Op(const char* name, CommOp::Scope scope, double seconds_per_call, bool overlappable,
          Collective collective = Collective::kAllToAll) {
  CommOp op;
  op.name = name;
  op.scope = scope;
  op.collective = collective;
  op.calls_fwd = 1;
  op.calls_bwd = 1;
  op.seconds_per_call = seconds_per_call;
  op.overlappable = overlappable;
  return op;
}

// Two pipeline ranks of dense layers: 3 on rank 0, 2 on rank 1; a layer
// runs 1 s forward, 2 s backward, 0.5 s recomputation.
StepWork TwoRanks(long long microbatches) {
  StepWork w;
  w.pp = 2;
  w.microbatches = microbatches;
  w.block[static_cast<size_t>(BlockKind::kDenseLayer)] = {1, 2, 0.5};
  w.ranks.resize(2);
  w.ranks[0].blocks[static_cast<size_t>(BlockKind::kDenseLayer)] = 3;
  w.ranks[0].forward_s = 3;
  w.ranks[0].backward_s = 3 * 2.5;
  w.ranks[1].blocks[static_cast<size_t>(BlockKind::kDenseLayer)] = 2;
  w.ranks[1].pipeline_rank = 1;
  w.ranks[1].forward_s = 2;
  w.ranks[1].backward_s = 2 * 2.5;
  for (RankWork& r : w.ranks) r.boundary_crossings = 1;
  return w;
}

// One MoE layer per rank: forward F = 1 s (its experts X_f = 0.6 s, its
// attention 0.4 s), backward B = 2 s (experts X_b = 1.2 s, of which their
// weight gradients X_w = 0.4 s; the layer's W = 0.7 s), recomputation
// R = 0.5 s (the experts' X_r = 0.2 s). Its EP-overlap all-to-alls: a
// dispatch of 0.9 s a call and a combine of 1.1 s, one call each way:
// 4 s per micro-batch, exposed when alone. In a steady pair the four
// phases (schedule.cc PairPhases) run
//   the forward's attention F - X_f = 0.4 beside the combine's gradient 1.1,
//   the backward's experts X_b + X_r - X_w = 1.0 beside the dispatch 0.9,
//   the forward's experts and deferred wgrad X_f + X_w = 1.0 beside the
//     dispatch's gradient 0.9,
//   the backward's attention B + R - X_b - X_r = 1.1 beside the combine 1.1,
// exposing 0.7 + 0 + 0 + 0 = 0.7 s (the whole block's 3.5 s of compute
// would have hidden all but 0.5 s).
StepWork EpOverlapRanks(PipelineSchedule schedule, int vpp) {
  StepWork w;
  w.schedule = schedule;
  w.pp = 2;
  w.vpp = vpp;
  w.microbatches = 8;
  w.block[static_cast<size_t>(BlockKind::kMoeLayer)] = {1, 2, 0.5, 0.7};
  w.experts[static_cast<size_t>(BlockKind::kMoeLayer)] = {0.6, 1.2, 0.2, 0.4};
  w.ranks.resize(2);
  for (size_t p = 0; p < 2; ++p) {
    w.ranks[p].pipeline_rank = static_cast<int>(p);
    w.ranks[p].blocks[static_cast<size_t>(BlockKind::kMoeLayer)] = 1;
    w.ranks[p].forward_s = 1;
    w.ranks[p].backward_s = 2.5;
    w.ranks[p].weight_grad_s = 0.7;
  }
  w.ops = {Op("moe_dispatch", CommOp::kPerMoeLayer, 0.9, false), Op("moe_combine", CommOp::kPerMoeLayer, 1.1, false)};
  w.ops[1].combine = true;
  for (CommOp& op : w.ops) op.hides_behind_other_microbatch = true;
  return w;
}

}  // namespace

TEST_CASE("per-layer communication: exposed, or hidden up to the layer's compute") {
  // Per layer: an exposed op of 0.1 s per call (2 calls: 0.2 s) and an
  // overlappable one of 2 s per call (4 s) against 3.5 s of layer compute,
  // so 0.2 + (4 - 3.5) = 0.7 s exposed per layer. A boundary send of
  // 0.25 s per call adds 0.5 s per micro-batch.
  StepWork w = TwoRanks(8);
  w.ops = {Op("a", CommOp::kPerLayer, 0.1, false), Op("b", CommOp::kPerDenseLayer, 2, true),
           Op("send", CommOp::kPerStageBoundary, 0.25, false)};
  const PipelineTimes t = SchedulePipeline(w);
  CHECK(t.ranks[0].compute_s == doctest::Approx(3 * 3.5));
  CHECK(t.ranks[0].exposed_comm_s == doctest::Approx(3 * 0.7));
  CHECK(t.ranks[0].boundary_s == doctest::Approx(0.5));
  CHECK(t.ranks[1].exposed_comm_s == doctest::Approx(2 * 0.7));
  // t_max = 10.5 + 2.6 = 13.1 on rank 0; 1F1B: (m + pp - 1) t_max = 9 x 13.1.
  CHECK(t.slowest == 0);
  CHECK(t.stage_time_s == doctest::Approx(13.1));
  CHECK(t.bubble_s == doctest::Approx(13.1));
  CHECK(t.pipeline_s == doctest::Approx(9 * 13.1));
}

TEST_CASE("interleaving divides the bubble by vpp") {
  StepWork w = TwoRanks(8);
  w.vpp = 4;
  const PipelineTimes t = SchedulePipeline(w);
  // No communication: t_max = 10.5 s; bubble (pp - 1) / vpp t_max = 10.5 / 4.
  CHECK(t.bubble_s == doctest::Approx(10.5 / 4));
  CHECK(t.pipeline_s == doctest::Approx(8 * 10.5 + 10.5 / 4));
}

TEST_CASE("data-parallel traffic hides behind one micro-batch of the slowest rank") {
  // Rank 0: forward 3 s, backward 7.5 s. Reduce-scatter 10 s (1 bwd call
  // set = 2 calls of 5 s): 2.5 s exposed; all-gather 2 s: hidden.
  StepWork w = TwoRanks(8);
  w.ops = {Op("rs", CommOp::kPerStep, 5, true, Collective::kReduceScatter),
           Op("ag", CommOp::kPerStep, 1, true, Collective::kAllGather)};
  const DataParallelTimes dp = DataParallelExposure(w, SchedulePipeline(w));
  CHECK(dp.reduce_s == doctest::Approx(10));
  CHECK(dp.gather_s == doctest::Approx(2));
  CHECK(dp.exposed_s == doctest::Approx(2.5));
}

TEST_CASE("interleaved: vpp crossings per micro-batch hide behind compute; fill and drain pay pp - 1") {
  // A crossing sends 0.25 s forward and 0.25 s backward: s = 0.5 s. With
  // vpp 4 each rank sends 4 x 0.5 = 2 s per micro-batch, hidden behind its
  // 10.5 s of compute (rank 0), so t_max = 10.5 s; the bubble is
  // (pp - 1) / vpp x t_max + (pp - 1) x s = 10.5 / 4 + 0.5.
  StepWork w = TwoRanks(8);
  w.vpp = 4;
  w.schedule = PipelineSchedule::kInterleaved1F1B;
  for (RankWork& r : w.ranks) r.boundary_crossings = 4;
  w.ops = {Op("send", CommOp::kPerStageBoundary, 0.25, false)};
  PipelineTimes t = SchedulePipeline(w);
  CHECK(t.ranks[0].boundary_s == 0);
  CHECK(t.stage_time_s == doctest::Approx(10.5));
  CHECK(t.bubble_s == doctest::Approx(10.5 / 4 + 0.5));
  // Sends longer than the compute: 4 x 2 x 2 = 16 s against rank 1's 7 s
  // and rank 0's 10.5 s leave 16 - 7 = 9 s exposed on rank 1: t = 16 s there.
  w.ops = {Op("send", CommOp::kPerStageBoundary, 2, false)};
  t = SchedulePipeline(w);
  CHECK(t.ranks[1].boundary_s == doctest::Approx(16 - 7));
  CHECK(t.stage_time_s == doctest::Approx(16));
  // 1F1B waits for its one crossing: t = compute + s.
  StepWork one = TwoRanks(8);
  one.ops = {Op("send", CommOp::kPerStageBoundary, 0.25, false)};
  CHECK(SchedulePipeline(one).ranks[0].total_s() == doctest::Approx(10.5 + 0.5));
}

TEST_CASE("EP overlap: each all-to-all hides behind the one phase of the other micro-batch it runs beside") {
  // EpOverlapRanks: 4 s of all-to-all per micro-batch against 3.5 s of
  // compute. Without overlap: 4 s exposed. With it, the steady pair exposes
  // per phase a_i - min(C_i, a_i): 1.1 - 0.4 = 0.7 beside the forward's
  // attention, nothing in the other three, 0.7 s in all (not the 0.5 s the
  // whole block would hide). Micro-batches alone (pp - p of m = 8 on rank
  // p in 1F1B: 2 on rank 0) expose all 4 s: rank 0 averages
  // (2 x 4 + 6 x 0.7) / 8 = 1.525 s, rank 1 (4 + 7 x 0.7) / 8 = 1.1125 s.
  StepWork w = EpOverlapRanks(PipelineSchedule::k1F1B, 1);
  for (CommOp& op : w.ops) op.hides_behind_other_microbatch = false;
  CHECK(SchedulePipeline(w).ranks[0].exposed_comm_s == doctest::Approx(4));
  for (CommOp& op : w.ops) op.hides_behind_other_microbatch = true;
  PipelineTimes t = SchedulePipeline(w);
  CHECK(t.ranks[0].exposed_comm_s == doctest::Approx(1.525));
  CHECK(t.ranks[1].exposed_comm_s == doctest::Approx(1.1125));
  // The same ops with dispatch and combine swapped: the combine's gradient
  // (0.9) beside the forward's attention (0.4) exposes 0.5, the dispatch
  // (1.1) beside the backward's experts (1.0) 0.1, the dispatch's gradient
  // (1.1) beside the forward's experts and deferred wgrad (1.0) 0.1: 0.7
  // again, by another road: (2 x 4 + 6 x 0.7) / 8 on rank 0.
  std::swap(w.ops[0].combine, w.ops[1].combine);
  CHECK(SchedulePipeline(w).ranks[0].exposed_comm_s == doctest::Approx(1.525));
  std::swap(w.ops[0].combine, w.ops[1].combine);
  // DeepEP kernels on 20 of 132 SMs leave compute at 112 / 132 (k =
  // 132 / 112): a phase of C_i beside a_i runs a_i + max(0, C_i - a_i / k)
  // and exposes a_i - min(C_i, a_i / k):
  //   1.1 - 0.4 + 2 (0.9 - 0.9 x 112 / 132) + (1.1 - 1.1 x 112 / 132)
  //   = 0.7 + 0.2727 + 0.1667 = 1.1394 s.
  for (CommOp& op : w.ops) op.sms = 20;
  w.gpu_sms = 132;
  t = SchedulePipeline(w);
  const double slowed = 0.7 + 2 * (0.9 - 0.9 * 112 / 132) + (1.1 - 1.1 * 112 / 132);
  CHECK(slowed == doctest::Approx(1.1394).epsilon(1e-4));
  CHECK(t.ranks[0].exposed_comm_s == doctest::Approx((2 * 4 + 6 * slowed) / 8));
  for (CommOp& op : w.ops) op.sms = 0;
  // Overlappable ops of 0.7 s leave W_left = 2.8 of the 3.5 s, 0.8 of each
  // phase: 0.32, 0.8, 0.8, 0.88 beside 1.1, 0.9, 0.9, 1.1 expose
  // 0.78 + 0.1 + 0.1 + 0.22 = 1.2 s (the overlappable op itself hides).
  w.ops.push_back(Op("ring", CommOp::kPerMoeLayer, 0.35, true));
  CHECK(SchedulePipeline(w).ranks[0].exposed_comm_s == doctest::Approx((2 * 4 + 6 * 1.2) / 8));
  w.ops.pop_back();
  // What one all-to-all hides is bounded by its phase, whatever the rest of
  // the block: a combine of 10 s a call exposes 10 - 0.4 of its gradient
  // and 10 - 1.1 of its forward call, 18.5 s in the steady pair with the
  // dispatch's 0 (the whole block's compute would have hidden 3.5 of the
  // 21.8 s: 18.3 exposed).
  w.ops[1].seconds_per_call = 10;
  CHECK(SchedulePipeline(w).ranks[0].exposed_comm_s == doctest::Approx((2 * 21.8 + 6 * 18.5) / 8));
}

TEST_CASE("the host in an EP-overlap pair: both passes' launches against the pair's GPU time") {
  // EpOverlapRanks with a host that issues a MoE layer's forward in 2 s and
  // its backward in 2.5 s, and one sync per forward idling the GPU 0.05 s.
  // Alone, a pass's GPU time holds its all-to-alls: forward 1 + 0.9 + 1.1 =
  // 3 s, backward 2.5 + 2 = 4.5 s, both longer than their host's: 0
  // exposed. In a steady pair one thread issues both, 4.5 s, while the GPU
  // runs the pair in 3.5 + 0.7 = 4.2 s: 0.3 s exposed. Per micro-batch on
  // rank 0 (2 of 8 alone): 6 / 8 x 0.3 + 0.05 = 0.275 s. (Pass by pass the
  // steady forward, 1 s of compute and its share of the pair's 0.7 s, would
  // have exposed 2 - 1.2 = 0.8 s.)
  StepWork w = EpOverlapRanks(PipelineSchedule::k1F1B, 1);
  HostBlock& h = w.host.block[static_cast<size_t>(BlockKind::kMoeLayer)];
  h.forward = {2.0, 1.0, 0, 1};
  h.backward = {2.5, 2.5, 0, 0};
  w.host.sync_s = 0.05;
  PipelineTimes t = SchedulePipeline(w);
  CHECK(t.ranks[0].host_s == doctest::Approx(4.5));
  CHECK(t.ranks[0].host_exposed_s == doctest::Approx(6.0 / 8 * 0.3 + 0.05));
  // Rank 1 has 1 of 8 alone: 7 / 8 x 0.3 + 0.05.
  CHECK(t.ranks[1].host_exposed_s == doctest::Approx(7.0 / 8 * 0.3 + 0.05));
  // Without EP overlap every pass runs alone, its all-to-alls exposed in it:
  // forward GPU 3 s, backward 4.5 s, nothing but the sync exposed.
  for (CommOp& op : w.ops) op.hides_behind_other_microbatch = false;
  t = SchedulePipeline(w);
  CHECK(t.ranks[0].host_exposed_s == doctest::Approx(0.05));
}

TEST_CASE("the exposure attributed to each op adds up to the slowest rank's") {
  StepWork w = TwoRanks(8);
  w.ops = {Op("a", CommOp::kPerLayer, 0.1, false), Op("b", CommOp::kPerDenseLayer, 2, true),
           Op("send", CommOp::kPerStageBoundary, 0.25, false)};
  std::vector<double> share;
  const PipelineTimes t = SchedulePipeline(w, &share);
  REQUIRE(share.size() == 3);
  // Rank 0: 3 layers x (0.2 + 0.5) + 0.5 for the crossing.
  CHECK(share[0] == doctest::Approx(3 * 0.2));
  CHECK(share[1] == doctest::Approx(3 * 0.5));
  CHECK(share[2] == doctest::Approx(0.5));
  CHECK(share[0] + share[1] + share[2] ==
        doctest::Approx(t.ranks[0].exposed_comm_s + t.ranks[0].boundary_s));
}

TEST_CASE("a layer's weight gradients are its GEMM parts' forward time, inside its backward") {
  // A GEMM's backward is dgrad + wgrad at its forward's time each, so W =
  // the forward of the projections (1), MLP (2), router (0.25), routed (3)
  // and shared experts (0.5) = 6.75; the attention core (4) and the FP8
  // casts (0.125) have no weight gradient. A part's backward stays whole.
  LayerTimes t;
  t.attention_projections = {0, 1, 2};
  t.mlp = {0, 2, 4};
  t.router = {0, 0.25, 0.5};
  t.routed_experts = {0, 3, 6};
  t.shared_experts = {0, 0.5, 1};
  t.attention_core = {0, 4, 10};
  t.fp8_casts = {0, 0.125, 0.125};
  const BlockCost c = LayerBlockCost(t);
  CHECK(c.weight_grad_s == doctest::Approx(6.75));
  CHECK(c.backward_s == doctest::Approx(2 + 4 + 0.5 + 6 + 1 + 10 + 0.125));
  CHECK(PartBlockCost({0, 1, 2}).weight_grad_s == 0);
}

namespace {

// TwoRanks under `schedule`, with W = `w` of each layer's 2 s backward.
StepWork TwoRanksSplit(PipelineSchedule schedule, double w, long long microbatches = 8) {
  StepWork s = TwoRanks(microbatches);
  s.schedule = schedule;
  s.block[static_cast<size_t>(BlockKind::kDenseLayer)].weight_grad_s = w;
  s.ranks[0].weight_grad_s = 3 * w;
  s.ranks[1].weight_grad_s = 2 * w;
  return s;
}

}  // namespace

TEST_CASE("GPipe: 1F1B's bubble, m micro-batches in flight, no forward beside a backward") {
  // t_max = 10.5 s (rank 0): (m + pp - 1) t_max = 9 x 10.5.
  const PipelineTimes t = SchedulePipeline(TwoRanksSplit(PipelineSchedule::kGPipe, 0));
  CHECK(t.bubble_s == doctest::Approx(10.5));
  CHECK(t.pipeline_s == doctest::Approx(9 * 10.5));
  // Every forward runs before the first backward: all m, on every stage.
  CHECK(InflightMicrobatches(PipelineSchedule::kGPipe, 8, 1, 0, 64) == 64);
  CHECK(InflightMicrobatches(PipelineSchedule::kGPipe, 8, 1, 7, 64) == 64);
  // EP overlap has no other micro-batch to hide behind: all 4 s exposed.
  CHECK(SchedulePipeline(EpOverlapRanks(PipelineSchedule::kGPipe, 1)).ranks[0].exposed_comm_s == doctest::Approx(4));
}

TEST_CASE("ZB-H1: the bubble is (pp - 1)(t_max - W - min(F, B, W)), pp micro-batches in flight everywhere") {
  // Rank 0 is the slowest, t_max = 10.5 s: F = 3, its backward 7.5 s (with
  // recomputation) of which W = 3 x w, B = 7.5 - W.
  // w = 1: W = 3, B = 4.5, min = 3: bubble (2 - 1)(10.5 - 3 - 3) = 4.5,
  // F + B - W as Qi et al. write it.
  PipelineTimes t = SchedulePipeline(TwoRanksSplit(PipelineSchedule::kZeroBubbleH1, 1));
  CHECK(t.stage_time_s == doctest::Approx(10.5));
  CHECK(t.bubble_s == doctest::Approx(4.5));
  CHECK(t.pipeline_s == doctest::Approx(8 * 10.5 + 4.5));
  // w = 0.5: W = 1.5 leaves more on the drain and fills less of each gap:
  // 10.5 - 1.5 - 1.5 = 7.5.
  CHECK(SchedulePipeline(TwoRanksSplit(PipelineSchedule::kZeroBubbleH1, 0.5)).bubble_s == doctest::Approx(7.5));
  // w = 2 (the whole backward): W = 6, B = 1.5 (the recomputation): a gap
  // is only a B long, 10.5 - 6 - 1.5 = 3.
  CHECK(SchedulePipeline(TwoRanksSplit(PipelineSchedule::kZeroBubbleH1, 2)).bubble_s == doctest::Approx(3));
  // No weight gradients to defer: 1F1B's (pp - 1) t_max.
  CHECK(SchedulePipeline(TwoRanksSplit(PipelineSchedule::kZeroBubbleH1, 0)).bubble_s == doctest::Approx(10.5));
  // In flight: min(pp, m) on every stage (1F1B: pp - stage).
  CHECK(InflightMicrobatches(PipelineSchedule::kZeroBubbleH1, 8, 1, 0, 64) == 8);
  CHECK(InflightMicrobatches(PipelineSchedule::kZeroBubbleH1, 8, 1, 7, 64) == 8);
  CHECK(InflightMicrobatches(PipelineSchedule::kZeroBubbleH1, 8, 1, 7, 3) == 3);
  // Its forwards and backwards pair as 1F1B's, but its weight gradients
  // run as passes of their own, outside the pairs: the forward's experts
  // (0.6) alone beside the dispatch's gradient (0.9) expose 0.3, and the
  // backward's attention without its W (1.1 - 0.3 = 0.8) beside the
  // combine (1.1) 0.3; with the combine gradient's 0.7, 1.3 s per steady
  // pair: (2 x 4 + 6 x 1.3) / 8 on rank 0.
  CHECK(SchedulePipeline(EpOverlapRanks(PipelineSchedule::kZeroBubbleH1, 1)).ranks[0].exposed_comm_s ==
        doctest::Approx((2 * 4 + 6 * 1.3) / 8));
}

TEST_CASE("ZB-H1's bound can fall as a rank that is not the slowest recomputes more") {
  // Rank 0 the slowest: F = 3, backward 7.5 s, W = 3 (B = 4.5), t_max =
  // 10.5; rank 1: F = 3, backward 6 s, W = 4 (B = 2). The bound is m t_max
  // + the least of the ranks' (pp - 1)(t_max - W - min(F, B, W)): rank 0's
  // 10.5 - 3 - 3 = 4.5, rank 1's 10.5 - 4 - 2 = 4.5: 8 x 10.5 + 4.5. Rank
  // 1 recomputing 1.5 s more (backward 7.5, B = 3.5, its compute 10.5, not
  // above t_max) fills more of each gap: 10.5 - 4 - 3 = 3.5, and the bound
  // falls by 1 s. Under the other schedules it cannot (schedule.h).
  StepWork s = TwoRanksSplit(PipelineSchedule::kZeroBubbleH1, 1);
  s.ranks[1].forward_s = 3;
  s.ranks[1].backward_s = 6;
  s.ranks[1].weight_grad_s = 4;
  CHECK(PipelineLowerBound(s) == doctest::Approx(8 * 10.5 + 4.5));
  s.ranks[1].backward_s += 1.5;
  s.ranks[1].recompute_s += 1.5;
  CHECK(PipelineLowerBound(s) == doctest::Approx(8 * 10.5 + 3.5));
  CHECK(!LowerBoundGrowsWithRecompute(PipelineSchedule::kZeroBubbleH1));
  for (const PipelineSchedule schedule : {PipelineSchedule::k1F1B, PipelineSchedule::kGPipe,
                                          PipelineSchedule::kInterleaved1F1B, PipelineSchedule::kDualPipeV}) {
    CHECK(LowerBoundGrowsWithRecompute(schedule));
  }
}

TEST_CASE("DualPipeV: the bubble is (pp - 1) / 2 (t_max + max(F, B) - 3 W) + (pp - 1) s") {
  // Each rank's layers are its two chunks. With w = 1 of each layer's 2 s
  // backward, rank 0: F = 3, W = 3, B = 7.5 - 3 = 4.5, t_max = 10.5:
  // (2 - 1) / 2 (10.5 + 4.5 - 9) = 3.
  StepWork w = TwoRanksSplit(PipelineSchedule::kDualPipeV, 1);
  w.vpp = 2;
  PipelineTimes t = SchedulePipeline(w);
  CHECK(t.bubble_s == doctest::Approx(3));
  CHECK(t.pipeline_s == doctest::Approx(8 * 10.5 + 3));
  // Uniform chunk passes, F = B = W: the order's (pp - 1) chunk passes
  // idle, a sixth of 1F1B's (pp - 1) t_max. Layers of F 1, B 1, W 1:
  // rank 0 t_max = 9, bubble (9 + 3 - 9) / 2 = 1.5 = 9 / 6.
  w.block[static_cast<size_t>(BlockKind::kDenseLayer)] = {1, 2, 0, 1};
  w.ranks[0].backward_s = 6;
  w.ranks[1].backward_s = 4;
  t = SchedulePipeline(w);
  CHECK(t.stage_time_s == doctest::Approx(9));
  CHECK(t.bubble_s == doctest::Approx(9.0 / 6));
  // Sends overlap the rank's compute, as interleaved's: 2 chunks x 0.5 s
  // hide behind 9 s; the fill and drain add (pp - 1) x s = 0.5.
  for (RankWork& r : w.ranks) r.boundary_crossings = 2;
  w.ops = {Op("send", CommOp::kPerStageBoundary, 0.25, false)};
  t = SchedulePipeline(w);
  CHECK(t.ranks[0].boundary_s == 0);
  CHECK(t.bubble_s == doctest::Approx(9.0 / 6 + 0.5));
  // In flight: 2 pp + 1 chunks of 2 on every stage (at most 2 m).
  CHECK(InflightMicrobatches(PipelineSchedule::kDualPipeV, 8, 2, 0, 64) == 8.5);
  CHECK(InflightMicrobatches(PipelineSchedule::kDualPipeV, 8, 2, 7, 64) == 8.5);
  CHECK(InflightMicrobatches(PipelineSchedule::kDualPipeV, 2, 2, 0, 2) == 2);
  // EP overlap: outside its pairs rank p runs 3 pp - p - 1 forwards and as
  // many backwards (the last rank one more), over 2 chunks: 2.5 micro-
  // batches alone on either rank of pp 2. Its pairs' backwards leave their
  // W to a pass of its own, as ZB-H1's: 1.3 s per steady pair, so
  // (2.5 x 4 + 5.5 x 1.3) / 8.
  const PipelineTimes ep = SchedulePipeline(EpOverlapRanks(PipelineSchedule::kDualPipeV, 2));
  CHECK(ep.ranks[0].exposed_comm_s == doctest::Approx((2.5 * 4 + 5.5 * 1.3) / 8));
  CHECK(ep.ranks[1].exposed_comm_s == doctest::Approx((2.5 * 4 + 5.5 * 1.3) / 8));
}

TEST_CASE("BlockKindsOf: the block kinds of each scope, an MTP module's layer of the last layer's kind") {
  using K = BlockKind;
  const auto kinds = [](std::initializer_list<K> list) {
    unsigned bits = 0;
    for (K k : list) bits |= 1u << static_cast<unsigned>(k);
    return bits;
  };
  for (bool mtp_moe : {false, true}) {
    CAPTURE(mtp_moe);
    CHECK(BlockKindsOf(CommOp::kPerLayer, mtp_moe) == kinds({K::kDenseLayer, K::kMoeLayer, K::kMtpLayer}));
    CHECK(BlockKindsOf(CommOp::kPerDenseLayer, mtp_moe) ==
          (mtp_moe ? kinds({K::kDenseLayer}) : kinds({K::kDenseLayer, K::kMtpLayer})));
    CHECK(BlockKindsOf(CommOp::kPerMoeLayer, mtp_moe) ==
          (mtp_moe ? kinds({K::kMoeLayer, K::kMtpLayer}) : kinds({K::kMoeLayer})));
    CHECK(BlockKindsOf(CommOp::kPerEmbedding, mtp_moe) == kinds({K::kEmbedding}));
    CHECK(BlockKindsOf(CommOp::kPerOutputLayer, mtp_moe) == kinds({K::kOutputLayer}));
    CHECK(BlockKindsOf(CommOp::kPerStageBoundary, mtp_moe) == 0);
    CHECK(BlockKindsOf(CommOp::kPerStep, mtp_moe) == 0);
    CommOp op;
    for (CommOp::Scope scope : {CommOp::kPerLayer, CommOp::kPerDenseLayer, CommOp::kPerMoeLayer,
                                CommOp::kPerEmbedding, CommOp::kPerOutputLayer, CommOp::kPerStageBoundary,
                                CommOp::kPerStep}) {
      op.scope = scope;
      for (K k : kAllBlockKinds) {
        CHECK(RunsInBlock(op, k, mtp_moe) == ((BlockKindsOf(scope, mtp_moe) >> static_cast<unsigned>(k) & 1u) != 0));
      }
    }
  }
}

namespace {

// The schedule's per-layer exposure of rank `r` at lone share `lone`,
// summed one block kind at a time over the ops in plan order: an
// EP-overlap call hides behind the compute of the phase it runs in
// (doc/cost-model.md "EP overlap, phase by phase"), as the overlappable
// ops leave it.
double ReferenceExposedComm(const StepWork& w, const RankWork& r, double lone) {
  double exposed_comm = 0;
  const bool apart = w.schedule == PipelineSchedule::kZeroBubbleH1 || w.schedule == PipelineSchedule::kDualPipeV;
  for (BlockKind k : kAllBlockKinds) {
    double exposed = 0, hidden = 0, paired = 0;
    double dispatch_fwd = 0, combine_fwd = 0, dispatch_bwd = 0, combine_bwd = 0;
    int sms = 0;
    for (const CommOp& op : w.ops) {
      if (!RunsInBlock(op, k, w.mtp_moe)) continue;
      if (op.hides_behind_other_microbatch) {
        paired += op.seconds_per_microbatch();
        (op.combine ? combine_fwd : dispatch_fwd) += op.calls_fwd * op.seconds_per_call;
        (op.combine ? combine_bwd : dispatch_bwd) += op.calls_bwd * op.seconds_per_call;
        sms = std::max(sms, op.sms);
      } else {
        (op.overlappable ? hidden : exposed) += op.seconds_per_microbatch();
      }
    }
    const BlockCost& c = w.cost(k);
    const BlockCost& x = w.experts_cost(k);
    const double work_s = c.total_s();
    const double excess = std::max(0.0, hidden - work_s);
    double paired_exposed = 0;
    if (paired > 0) {
      const double left = work_s > 0 ? std::max(0.0, work_s - hidden) / work_s : 0;
      const double slow = sms > 0 && sms < w.gpu_sms ? double(w.gpu_sms) / (w.gpu_sms - sms) : 1.0;
      const double forward = c.forward_s, backward = c.backward_s + c.recompute_s;
      const double xf = std::min(x.forward_s, forward), xb = std::min(x.backward_s + x.recompute_s, backward);
      const double xw = std::min(x.weight_grad_s, xb);
      const double aw = std::min(std::max(0.0, c.weight_grad_s - x.weight_grad_s), backward - xb);
      const double phase[4] = {forward - xf, xb - xw, xf + (apart ? 0 : xw), backward - xb - (apart ? aw : 0)};
      const double a[4] = {combine_bwd, dispatch_fwd, dispatch_bwd, combine_fwd};
      double steady = 0;
      for (int i = 0; i < 4; ++i) steady += a[i] - std::min(phase[i] * left, a[i] / slow);
      paired_exposed = lone * paired + (1 - lone) * steady;
    }
    if (r.count(k) > 0) exposed_comm += r.count(k) * (exposed + excess + paired_exposed);
  }
  return exposed_comm;
}

double CrossingSeconds(const StepWork& w) {
  double crossing = 0;
  for (const CommOp& op : w.ops) {
    if (op.scope == CommOp::kPerStageBoundary) crossing += op.seconds_per_microbatch();
  }
  return crossing;
}

// Ops of every scope interleaved, plain, overlappable and, when `paired`,
// EP-overlap ones, with seconds some of whose per-kind sums round
// differently when added in reverse or scope by scope.
std::vector<CommOp> MixedOps(bool paired) {
  const CommOp::Scope scopes[] = {CommOp::kPerLayer,     CommOp::kPerMoeLayer,       CommOp::kPerDenseLayer,
                                  CommOp::kPerEmbedding, CommOp::kPerStageBoundary, CommOp::kPerOutputLayer,
                                  CommOp::kPerStep};
  const double seconds[] = {0.1, 0.7, 0.3, 1.0 / 3, 0.2, 3e-3};
  std::vector<CommOp> ops;
  for (int i = 0; i < 42; ++i) {
    CommOp op = Op("op", scopes[i % 7], seconds[i % 6], i % 3 == 1,
                   i % 4 == 0 ? Collective::kAllGather : Collective::kReduceScatter);
    if (paired && i % 5 == 2) {
      op.hides_behind_other_microbatch = true;
      op.combine = i % 2 == 0;
      op.sms = 4 * (i % 7);
    }
    ops.push_back(op);
  }
  return ops;
}

}  // namespace

TEST_CASE("SchedulePipeline sums each block kind's ops in plan order, bit for bit a pass per kind") {
  // Ranks holding every block kind. The reference is the schedule's
  // formula, summed one kind at a time over the ops in plan order (1F1B:
  // lone = min(pp - p, m) / m); the data-parallel sums too.
  for (bool mtp_moe : {false, true}) {
    CAPTURE(mtp_moe);
    StepWork w;
    w.pp = 3;
    w.microbatches = 5;
    w.mtp_moe = mtp_moe;
    w.gpu_sms = 132;
    for (BlockKind k : kAllBlockKinds) w.block[static_cast<size_t>(k)] = {0.3, 0.7, 0.1, 0.2};
    for (BlockKind k : kAllBlockKinds) w.experts[static_cast<size_t>(k)] = {0.1, 0.3, 0.05, 0.1};
    w.ranks.resize(3);
    for (int p = 0; p < 3; ++p) {
      RankWork& r = w.ranks[static_cast<size_t>(p)];
      r.pipeline_rank = p;
      r.blocks = {2 + p, 3 - p, p == 0 ? 1 : 0, p == 2 ? 1 : 0, p == 2 ? 1 : 0};
      r.forward_s = 1.1 + p;
      r.backward_s = 2.3 + p;
      r.boundary_crossings = 1;
    }
    w.ops = MixedOps(true);
    const PipelineTimes t = SchedulePipeline(w);
    const double crossing = CrossingSeconds(w);
    double reduce = 0, gather = 0;
    for (const CommOp& op : w.ops) {
      if (op.scope == CommOp::kPerStep) (op.collective == Collective::kAllGather ? gather : reduce) += op.seconds_per_microbatch();
    }
    const DataParallelTimes dp = DataParallelExposure(w, t);
    CHECK(dp.reduce_s == reduce);
    CHECK(dp.gather_s == gather);
    for (int p = 0; p < 3; ++p) {
      CAPTURE(p);
      const RankWork& r = w.ranks[static_cast<size_t>(p)];
      const double lone = InflightMicrobatches(PipelineSchedule::k1F1B, 3, 1, p, 5) / 5.0;
      CHECK(t.ranks[static_cast<size_t>(p)].exposed_comm_s == ReferenceExposedComm(w, r, lone));
      CHECK(t.ranks[static_cast<size_t>(p)].boundary_s == r.boundary_crossings * crossing);
    }
  }
}

TEST_CASE("ranks holding alike each get the time they would alone, with and without EP-overlap ops") {
  // SchedulePipeline gives a rank whose compute, block counts, crossings
  // and lone share equal the previous rank's that rank's time. Runs of
  // equal ranks, a rank differing in its compute alone (by one ulp), in
  // one block count, in its crossings; under 1F1B the lone share differs
  // from rank to rank (m = 9 > pp), under GPipe it is 1 on every rank, and
  // the interleaved schedule hides its sends behind the rank's compute.
  const PipelineSchedule schedules[] = {PipelineSchedule::k1F1B, PipelineSchedule::kGPipe,
                                        PipelineSchedule::kInterleaved1F1B};
  for (const PipelineSchedule schedule : schedules) {
    for (const bool paired : {false, true}) {
      CAPTURE(static_cast<int>(schedule));
      CAPTURE(paired);
      StepWork w;
      w.schedule = schedule;
      w.pp = 8;
      w.vpp = schedule == PipelineSchedule::kInterleaved1F1B ? 2 : 1;
      w.microbatches = 9;
      w.gpu_sms = 132;
      for (BlockKind k : kAllBlockKinds) w.block[static_cast<size_t>(k)] = {0.3, 0.7, 0.1, 0.2};
      for (BlockKind k : kAllBlockKinds) w.experts[static_cast<size_t>(k)] = {0.1, 0.3, 0.05, 0.1};
      RankWork a;
      a.blocks = {1, 3, 0, 0, 0};
      a.forward_s = 1.1;
      a.backward_s = 2.3;
      a.boundary_crossings = w.vpp;
      RankWork ulp = a;
      ulp.backward_s = std::nextafter(a.backward_s, 10.0);
      RankWork more = a;
      more.blocks[1] = 4;
      RankWork crossings = a;
      crossings.boundary_crossings = w.vpp + 1;
      w.ranks = {a, a, a, ulp, more, more, crossings, a};
      for (int p = 0; p < w.pp; ++p) w.ranks[static_cast<size_t>(p)].pipeline_rank = p;
      w.ops = MixedOps(paired);
      const PipelineTimes t = SchedulePipeline(w);
      const double crossing = CrossingSeconds(w);
      const double m = double(w.microbatches);
      int slowest = 0;
      for (int p = 1; p < w.pp; ++p) {
        if (t.ranks[static_cast<size_t>(p)].total_s() > t.ranks[static_cast<size_t>(slowest)].total_s()) slowest = p;
      }
      CHECK(t.slowest == slowest);
      CHECK(t.stage_time_s == t.ranks[static_cast<size_t>(slowest)].total_s());
      for (int p = 0; p < w.pp; ++p) {
        CAPTURE(p);
        const RankWork& r = w.ranks[static_cast<size_t>(p)];
        const RankTime& rt = t.ranks[static_cast<size_t>(p)];
        const double lone = schedule == PipelineSchedule::kGPipe
                                ? 1.0
                                : InflightMicrobatches(schedule, w.pp, w.vpp, p, w.microbatches) / m;
        const double compute = r.forward_s + r.backward_s;
        const double exposed = ReferenceExposedComm(w, r, lone);
        const double sends = r.boundary_crossings * crossing;
        CHECK(rt.compute_s == compute);
        CHECK(rt.exposed_comm_s == exposed);
        CHECK(rt.boundary_s ==
              (schedule == PipelineSchedule::kInterleaved1F1B ? std::max(0.0, sends - compute - exposed) : sends));
      }
    }
  }
}

TEST_CASE("the bound with a communication floor: by hand, where it is tight") {
  // TwoRanks with per layer an exposed op of 0.2 s and an overlappable one
  // of 4 s (T = 4.2 s against W = 3.5 s of layer compute) and a 0.5 s
  // crossing. max(0, T - W) = 0.7 s is exactly what the schedule exposes
  // per layer here, so rank 0's t' = 10.5 + 3 x 0.7 + 0.5 = 13.1 s = t_max,
  // and the bound is 1F1B's (m + pp - 1) t_max = 9 x 13.1 s, less the
  // relative 1e-9 margin.
  StepWork w = TwoRanks(8);
  w.ops = {Op("a", CommOp::kPerLayer, 0.1, false), Op("b", CommOp::kPerDenseLayer, 2, true),
           Op("send", CommOp::kPerStageBoundary, 0.25, false)};
  const CommSeconds floor = CommSecondsOf(w);
  CHECK(floor.block_s[static_cast<size_t>(BlockKind::kDenseLayer)] == doctest::Approx(4.2));
  CHECK(floor.block_s[static_cast<size_t>(BlockKind::kMoeLayer)] == doctest::Approx(0.2));
  CHECK(floor.block_s[static_cast<size_t>(BlockKind::kEmbedding)] == 0);
  CHECK(floor.crossing_s == doctest::Approx(0.5));
  const double bound = PipelineLowerBound(w, floor);
  CHECK(bound == doctest::Approx(9 * 13.1).epsilon(1e-8));
  CHECK(bound < SchedulePipeline(w).pipeline_s);
  // The compute alone gives only 9 x 10.5.
  CHECK(PipelineLowerBound(w) == doctest::Approx(9 * 10.5));
  // No communication at all: the compute-only bound, less the margin.
  CHECK(PipelineLowerBound(w, CommSeconds{}) == doctest::Approx(9 * 10.5).epsilon(1e-8));
  CHECK(PipelineLowerBound(w, CommSeconds{}) < 9 * 10.5);
}

TEST_CASE("the bound with a communication floor is below the schedule of every work whose ops reach it") {
  // Random works under every schedule: ranks with random block counts and
  // compute, ops of every scope, plain, overlappable or EP-overlap (with
  // SMs), and floors at or below the work's own CommSecondsOf. Whatever of
  // a block's ops its compute cannot cover is exposed however they overlap
  // (the proof in schedule.cc), so the bound never exceeds pipeline_s; at
  // the work's own floor it is never weaker than the compute-only bound
  // (but for the margin), and it is often well above it.
  testing::Draws d{20261204};
  const PipelineSchedule schedules[] = {PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B,
                                        PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipeV,
                                        PipelineSchedule::kGPipe};
  const CommOp::Scope scopes[] = {CommOp::kPerLayer,     CommOp::kPerMoeLayer,       CommOp::kPerDenseLayer,
                                  CommOp::kPerEmbedding, CommOp::kPerStageBoundary, CommOp::kPerOutputLayer,
                                  CommOp::kPerStep};
  auto unit = [&] { return double(d.Below(1000) + 1) / 1000.0; };
  int above = 0, cases = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    StepWork w;
    w.schedule = schedules[d.Below(5)];
    w.pp = 1 + static_cast<int>(d.Below(6));
    w.vpp = w.schedule == PipelineSchedule::kInterleaved1F1B ? 2 + static_cast<int>(d.Below(3)) : 1;
    w.microbatches = 1 + static_cast<long long>(d.Below(40));
    w.mtp_moe = d.Coin();
    for (BlockKind k : kAllBlockKinds) {
      BlockCost& b = w.block[static_cast<size_t>(k)];
      b.forward_s = unit();
      b.weight_grad_s = unit() * b.forward_s;
      b.backward_s = b.weight_grad_s + unit() * 2;
      b.recompute_s = d.Coin() ? unit() : 0;
      // An experts' share of each pass, at times above the block's own
      // (the schedule clamps it).
      BlockCost& x = w.experts[static_cast<size_t>(k)];
      x.forward_s = unit() * b.forward_s * 1.2;
      x.backward_s = unit() * b.backward_s;
      x.recompute_s = unit() * b.recompute_s;
      x.weight_grad_s = unit() * b.weight_grad_s * 1.5;
    }
    w.ranks.resize(static_cast<size_t>(w.pp));
    for (int p = 0; p < w.pp; ++p) {
      RankWork& r = w.ranks[static_cast<size_t>(p)];
      r.pipeline_rank = p;
      r.boundary_crossings = w.pp > 1 ? w.vpp : 0;
      for (BlockKind k : kAllBlockKinds) {
        const int n = static_cast<int>(d.Below(4));
        const BlockCost& b = w.cost(k);
        r.blocks[static_cast<size_t>(k)] = n;
        r.forward_s += n * b.forward_s;
        r.backward_s += n * (b.backward_s + b.recompute_s);
        r.recompute_s += n * b.recompute_s;
        r.weight_grad_s += n * b.weight_grad_s;
      }
    }
    const int ops = static_cast<int>(d.Below(12));
    for (int i = 0; i < ops; ++i) {
      CommOp op = Op("op", scopes[d.Below(7)], unit() * (d.Coin() ? 4 : 0.2), d.Coin());
      op.calls_bwd = double(d.Below(3));
      if (d.Below(3) == 0) {
        op.hides_behind_other_microbatch = true;
        op.combine = d.Coin();
        op.sms = static_cast<int>(d.Below(40));
      }
      w.ops.push_back(op);
    }
    const double pipeline_s = SchedulePipeline(w).pipeline_s;
    const CommSeconds own = CommSecondsOf(w);
    CommSeconds lower = own;
    for (double& s : lower.block_s) s *= unit();
    lower.crossing_s *= unit();
    CAPTURE(trial);
    REQUIRE(PipelineLowerBound(w, own) <= pipeline_s);
    REQUIRE(PipelineLowerBound(w, lower) <= pipeline_s);
    REQUIRE(PipelineLowerBound(w, own) >= PipelineLowerBound(w) * (1 - 2e-9));
    ++cases;
    above += PipelineLowerBound(w, own) > PipelineLowerBound(w) * 1.01;
  }
  CHECK(above > cases / 4);
}
