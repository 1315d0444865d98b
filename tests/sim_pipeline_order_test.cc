// The order of pipeline work per rank (sim/pipeline_order.h), checked by a
// small replay local to this test: each rank runs its list in order; a
// pass starts when the passes it depends on are done and its rank is free;
// F, B and W take the durations given per pass (one chunk), an overlapped
// pair one given duration; communication is free. No pass able to start =
// deadlock. Each case states the formula first, then asserts it.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "costmodel/schedule.h"
#include "sim/pipeline_order.h"

using namespace foldplan;

namespace {

struct Durations {
  double f = 1, b = 1, w = 0;  // one chunk's F, B (input grad, or whole when not split), W
  double pair = 2;             // an overlapped F&B pair (DualPipeV)
};

struct Replay {
  bool deadlock = false;
  double step_s = 0;
  std::vector<double> busy_s;  // per rank
};

Replay Run(const PipelineOrder& o, const Durations& d) {
  using Key = std::tuple<PassKind, int, int>;  // kind, micro-batch, virtual stage
  const int stages = o.pp * o.vpp;
  std::map<Key, double> done;
  std::vector<size_t> next(o.ranks.size(), 0);
  std::vector<double> free_at(o.ranks.size(), 0);
  Replay r;
  r.busy_s.assign(o.ranks.size(), 0);
  auto deps = [&](const PipelinePass& p, int s) {
    std::vector<Key> k;
    if (p.kind == PassKind::kForward && s > 0) k.emplace_back(PassKind::kForward, p.microbatch, s - 1);
    if (p.kind == PassKind::kBackward) {
      k.emplace_back(PassKind::kForward, p.microbatch, s);
      if (s < stages - 1) k.emplace_back(PassKind::kBackward, p.microbatch, s + 1);
    }
    if (p.kind == PassKind::kWeightGrad) k.emplace_back(PassKind::kBackward, p.microbatch, s);
    return k;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t rank = 0; rank < o.ranks.size(); ++rank) {
      const std::vector<PipelinePass>& list = o.ranks[rank];
      if (next[rank] >= list.size()) continue;
      const size_t n = list[next[rank]].paired_with_next ? 2 : 1;
      REQUIRE(next[rank] + n <= list.size());
      double start = free_at[rank];
      bool ready = true;
      for (size_t i = 0; i < n; ++i) {
        const PipelinePass& p = list[next[rank] + i];
        for (const Key& k : deps(p, o.VirtualStage(int(rank), p.chunk))) {
          auto it = done.find(k);
          if (it == done.end()) ready = false;
          else start = std::max(start, it->second);
        }
      }
      if (!ready) continue;
      const PipelinePass& p = list[next[rank]];
      const double len = n == 2 ? d.pair
                         : p.kind == PassKind::kForward ? d.f
                         : p.kind == PassKind::kBackward ? d.b
                                                          : d.w;
      for (size_t i = 0; i < n; ++i) {
        const PipelinePass& q = list[next[rank] + i];
        done[{q.kind, q.microbatch, o.VirtualStage(int(rank), q.chunk)}] = start + len;
      }
      free_at[rank] = start + len;
      r.busy_s[rank] += len;
      next[rank] += n;
      progress = true;
    }
  }
  for (size_t rank = 0; rank < o.ranks.size(); ++rank) {
    if (next[rank] < o.ranks[rank].size()) r.deadlock = true;
    r.step_s = std::max(r.step_s, free_at[rank]);
  }
  return r;
}

// Activations in flight at the peak on each rank, in whole-rank
// equivalents: +1 chunk at each F, -1 when its activations are released
// (at B; when B and W are split, at W, which still reads the layer
// inputs), over vpp chunks.
std::vector<double> PeakInflight(const PipelineOrder& o) {
  std::vector<double> peak;
  for (const std::vector<PipelinePass>& list : o.ranks) {
    int now = 0, most = 0;
    const PassKind release = o.split_backward ? PassKind::kWeightGrad : PassKind::kBackward;
    for (const PipelinePass& p : list) {
      if (p.kind == PassKind::kForward) most = std::max(most, ++now);
      if (p.kind == release) --now;
    }
    peak.push_back(double(most) / o.vpp);
  }
  return peak;
}

PipelineOrder Build(PipelineSchedule s, int pp, int vpp, long long m) {
  Result<PipelineOrder> o = BuildPipelineOrder(s, pp, vpp, m);
  REQUIRE_MESSAGE(o.ok(), o.status().message());
  return *o;
}

struct Case {
  PipelineSchedule schedule;
  int pp, vpp;
  long long m;
};

std::string Describe(const Case& c) {
  return std::string(Name(c.schedule)) + " pp " + std::to_string(c.pp) + " vpp " + std::to_string(c.vpp) + " m " +
         std::to_string(c.m);
}

// Degrees every schedule accepts, small enough to replay all of them.
std::vector<Case> Cases() {
  std::vector<Case> out;
  for (int pp : {1, 2, 3, 4, 5, 8}) {
    for (long long m : {1, 2, 3, 4, 7, 8, 16, 17, 24}) {
      for (PipelineSchedule s : {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B, PipelineSchedule::kZeroBubbleH1}) {
        out.push_back({s, pp, 1, m});
      }
      for (int vpp : {2, 3}) {
        if (m % pp == 0) out.push_back({PipelineSchedule::kInterleaved1F1B, pp, vpp, m});
      }
      if (m >= 2 * pp) out.push_back({PipelineSchedule::kDualPipeV, pp, 2, m});
    }
  }
  return out;
}

}  // namespace

TEST_CASE("every rank runs each micro-batch's F and B once per chunk, and W once when split") {
  for (const Case& c : Cases()) {
    INFO(Describe(c));
    const PipelineOrder o = Build(c.schedule, c.pp, c.vpp, c.m);
    CHECK(o.split_backward ==
          (c.schedule == PipelineSchedule::kZeroBubbleH1 || c.schedule == PipelineSchedule::kDualPipeV));
    REQUIRE(o.ranks.size() == size_t(c.pp));
    for (const std::vector<PipelinePass>& list : o.ranks) {
      std::map<std::tuple<PassKind, int, int>, int> seen;
      for (size_t i = 0; i < list.size(); ++i) {
        const PipelinePass& p = list[i];
        REQUIRE(p.microbatch >= 0);
        REQUIRE(p.microbatch < c.m);
        REQUIRE(p.chunk >= 0);
        REQUIRE(p.chunk < c.vpp);
        ++seen[{p.kind, p.microbatch, p.chunk}];
        // A pair is a forward and the backward of another micro-batch.
        if (p.paired_with_next) {
          REQUIRE(c.schedule == PipelineSchedule::kDualPipeV);
          REQUIRE(i + 1 < list.size());
          CHECK(p.kind == PassKind::kForward);
          CHECK(list[i + 1].kind == PassKind::kBackward);
          CHECK(list[i + 1].microbatch != p.microbatch);
        }
      }
      const size_t kinds = o.split_backward ? 3 : 2;
      CHECK(seen.size() == kinds * size_t(c.m) * size_t(c.vpp));
      CHECK(list.size() == kinds * size_t(c.m) * size_t(c.vpp));
    }
  }
}

TEST_CASE("every order replays without deadlock, whatever the durations") {
  for (const Case& c : Cases()) {
    INFO(Describe(c));
    const PipelineOrder o = Build(c.schedule, c.pp, c.vpp, c.m);
    for (Durations d : {Durations{1, 2, 0, 3}, Durations{1, 1, 1, 1.5}, Durations{2, 0.5, 3, 2.5}}) {
      if (!o.split_backward) d.b += d.w;  // a whole backward
      CHECK_FALSE(Run(o, d).deadlock);
    }
  }
}

TEST_CASE("degrees a schedule cannot run with are refused, naming the schedule and its need") {
  struct Bad {
    PipelineSchedule schedule;
    int pp, vpp;
    long long m;
    const char* says;
  };
  for (const Bad& b : {Bad{PipelineSchedule::k1F1B, 4, 2, 8, "vpp == 1"},
                       Bad{PipelineSchedule::kGPipe, 4, 2, 8, "vpp == 1"},
                       Bad{PipelineSchedule::kZeroBubbleH1, 4, 3, 8, "vpp == 1"},
                       Bad{PipelineSchedule::kInterleaved1F1B, 4, 1, 8, "vpp > 1"},
                       Bad{PipelineSchedule::kInterleaved1F1B, 4, 2, 10, "divisible by pp"},
                       Bad{PipelineSchedule::kDualPipeV, 4, 3, 8, "vpp == 2"},
                       Bad{PipelineSchedule::kDualPipeV, 4, 2, 7, "at least 2 pp = 8"},
                       Bad{PipelineSchedule::k1F1B, 0, 1, 8, "at least 1"},
                       Bad{PipelineSchedule::k1F1B, 4, 1, 0, "at least 1"},
                       Bad{PipelineSchedule::kZeroBubbleH1, 1024, 1, 1LL << 20, "passes"}}) {
    const Result<PipelineOrder> o = BuildPipelineOrder(b.schedule, b.pp, b.vpp, b.m);
    REQUIRE_FALSE(o.ok());
    CHECK(o.status().message().find(Name(b.schedule)) != std::string::npos);
    CHECK_MESSAGE(o.status().message().find(b.says) != std::string::npos, o.status().message());
  }
}

TEST_CASE("1F1B: the bubble is (pp - 1) / (m + pp - 1) of the step") {
  // Uniform stages, F = 1, B = 2: step = (m + pp - 1)(F + B), so the idle
  // share of each rank, (pp - 1)(F + B) of it, is (pp - 1) / (m + pp - 1).
  for (int pp : {2, 4, 8}) {
    for (long long m : {(long long)pp, 2LL * pp, 24LL}) {
      CAPTURE(pp);
      CAPTURE(m);
      const Replay r = Run(Build(PipelineSchedule::k1F1B, pp, 1, m), {1, 2, 0, 0});
      CHECK(r.step_s == doctest::Approx((m + pp - 1) * 3.0));
      CHECK((r.step_s - r.busy_s[0]) / r.step_s == doctest::Approx(double(pp - 1) / double(m + pp - 1)));
    }
  }
}

TEST_CASE("interleaving over vpp chunks divides the bubble by vpp") {
  // A rank's micro-batch is vpp chunks of F = 1, B = 2: t = 3 vpp, and
  // step = m t + (pp - 1) / vpp x t = 3 (m vpp + pp - 1).
  for (int pp : {2, 4}) {
    for (int vpp : {2, 3, 4}) {
      for (long long m : {(long long)pp, 4LL * pp}) {
        CAPTURE(pp);
        CAPTURE(vpp);
        CAPTURE(m);
        const Replay r = Run(Build(PipelineSchedule::kInterleaved1F1B, pp, vpp, m), {1, 2, 0, 0});
        const double t = 3.0 * vpp;
        CHECK(r.step_s == doctest::Approx(m * t + (pp - 1) * t / vpp));
      }
    }
  }
}

TEST_CASE("GPipe: 1F1B's bubble, with all m micro-batches in flight") {
  // Fill (pp - 1) F and drain (pp - 1) B, as 1F1B: step = (m + pp - 1)(F + B);
  // every forward runs before the first backward, so each rank holds m.
  for (int pp : {2, 4, 8}) {
    for (long long m : {3LL, 16LL}) {
      CAPTURE(pp);
      CAPTURE(m);
      const PipelineOrder o = Build(PipelineSchedule::kGPipe, pp, 1, m);
      CHECK(Run(o, {1, 2, 0, 0}).step_s == doctest::Approx((m + pp - 1) * 3.0));
      for (double peak : PeakInflight(o)) CHECK(peak == m);
    }
  }
}

TEST_CASE("ZB-H1: the bubble is (pp - 1)(F + B - W) while W is no longer than F or B") {
  // Qi et al.'s (p - 1)(T_F + T_B - T_W): each rank fills pp - 1 gaps with
  // one W each; a gap is as long as an F or a B, so in general the order
  // gives (pp - 1)(F + B - min(F, B, W)), the paper's formula for
  // W <= min(F, B). Every case has m >= pp.
  struct D {
    double f, b, w, bubble_per_stage;  // bubble / (pp - 1)
  };
  for (const D& d : {D{1, 1, 1, 1}, D{1, 2, 1, 2}, D{1, 1.5, 0.5, 2}, D{2, 1, 1, 2},
                     // W longer than F or B: only min(F, B) of it fills each gap.
                     D{1, 1, 1.5, 1}, D{1, 0.5, 1, 1}}) {
    for (int pp : {2, 4, 8}) {
      for (long long m : {(long long)pp, 2LL * pp + 1, 24LL}) {
        CAPTURE(d.f);
        CAPTURE(d.b);
        CAPTURE(d.w);
        CAPTURE(pp);
        CAPTURE(m);
        const Replay r = Run(Build(PipelineSchedule::kZeroBubbleH1, pp, 1, m), {d.f, d.b, d.w, 0});
        CHECK(r.step_s - m * (d.f + d.b + d.w) == doctest::Approx((pp - 1) * d.bubble_per_stage));
      }
    }
  }
  // With W = 0 nothing fills the gaps: 1F1B's (pp - 1)(F + B).
  const Replay r = Run(Build(PipelineSchedule::kZeroBubbleH1, 4, 1, 8), {1, 2, 0, 0});
  CHECK(r.step_s == doctest::Approx(8 * 3 + 3 * 3));
}

TEST_CASE("DualPipeV on uniform chunks: the last rank idles (pp - 1) chunk passes") {
  // Every chunk's F, B and W take t = 1. Rank p runs 3 pp - p - 1 forwards
  // and as many backwards alone (the last rank one more of each: its first
  // F0 and B1), the rest of its 2 m of each in pairs: the last rank has
  // 2 m - 2 pp - 1 pairs and 2 pp + 1 lone forwards and backwards. It is
  // the critical rank, and idles (pp - 1) t whatever a pair takes (P, with
  // max(F, B) <= P <= F + B), so
  //   step = (2 m - 2 pp - 1)(P + W) + (2 pp + 1)(F + B + W) + (pp - 1) t.
  // Without overlap (P = F + B = 2) that is 2 m (F + B + W) + (pp - 1) t:
  // a bubble of (pp - 1) t, a sixth of 1F1B's (pp - 1) x the rank's
  // 2 (F + B + W) on the same ranks, a third of interleaving's over 2 chunks.
  for (int pp : {2, 3, 4, 8}) {
    for (long long m : {2LL * pp, 2LL * pp + 3, 5LL * pp}) {
      for (double pair : {2.0, 1.5, 1.0}) {
        CAPTURE(pp);
        CAPTURE(m);
        CAPTURE(pair);
        const PipelineOrder o = Build(PipelineSchedule::kDualPipeV, pp, 2, m);
        const Replay r = Run(o, {1, 1, 1, pair});
        CHECK(r.step_s == doctest::Approx((2 * m - 2 * pp - 1) * (pair + 1) + (2 * pp + 1) * 3 + (pp - 1)));
        CHECK(r.step_s - r.busy_s[size_t(pp - 1)] == doctest::Approx(pp - 1));
      }
    }
  }
  // The DualPipe README's (PP/2 - 1)(F&B + B - 3W) for DualPipe on 2 pp
  // ranks, with its B whole (here B + W) and F&B the pair with its W,
  // would be (pp - 1)(P + B - W) = (pp - 1) 2 at P = 2: the order's own
  // idle, (pp - 1), is half of that; its lone passes, not counted as
  // bubble here, cost (2 pp + 1)(F + B - P) more than pairs would.
}

TEST_CASE("activations in flight at the peak match the cost model's InflightMicrobatches") {
  // 1F1B min(pp - p, m); interleaved min(2 (pp - p - 1) + (vpp - 1) pp + 1,
  // m vpp) / vpp; GPipe m; ZB-H1 min(pp, m) on every rank (a micro-batch's
  // activations wait for its W); DualPipeV 2 pp + 1 chunks, pp + 1/2.
  for (const Case& c : Cases()) {
    INFO(Describe(c));
    const std::vector<double> peak = PeakInflight(Build(c.schedule, c.pp, c.vpp, c.m));
    for (int p = 0; p < c.pp; ++p) {
      CAPTURE(p);
      CHECK(peak[size_t(p)] == doctest::Approx(InflightMicrobatches(c.schedule, c.pp, c.vpp, p, c.m)));
    }
  }
  CHECK(PeakInflight(Build(PipelineSchedule::kZeroBubbleH1, 4, 1, 16)) == std::vector<double>{4, 4, 4, 4});
  CHECK(PeakInflight(Build(PipelineSchedule::kDualPipeV, 4, 2, 16)) == std::vector<double>{4.5, 4.5, 4.5, 4.5});
}

namespace {

// Uniform stages as the cost model sees them: pp ranks of one block whose
// micro-batch is vpp chunks of F, B (input grad) and W, no communication.
StepWork UniformStepWork(PipelineSchedule s, int pp, int vpp, long long m, const Durations& d) {
  StepWork w;
  w.schedule = s;
  w.pp = pp;
  w.vpp = vpp;
  w.microbatches = m;
  w.ranks.resize(size_t(pp));
  for (int p = 0; p < pp; ++p) {
    RankWork& r = w.ranks[size_t(p)];
    r.pipeline_rank = p;
    r.blocks[size_t(BlockKind::kDenseLayer)] = 1;
    r.forward_s = vpp * d.f;
    r.backward_s = vpp * (d.b + d.w);
    r.weight_grad_s = vpp * d.w;
  }
  return w;
}

}  // namespace

TEST_CASE("the cost model's bubble is the replay's on uniform stages; DualPipeV's is a close upper bound") {
  // 1F1B, GPipe, interleaved, ZB-H1: SchedulePipeline's bubble = the
  // replay's step - m t (t = vpp (F + B + W)). DualPipeV without overlap
  // (a pair takes F + B): the model's (pp - 1)(t_c + max(F_c, B_c) - 3 W_c)
  // is never below the replay's idle and at most 0.6 t_c above it.
  for (int pp : {2, 4, 8}) {
    const long long m = 3LL * pp;
    for (double b : {0.6, 1.0, 1.5, 2.0, 2.5}) {
      for (double share : {0.2, 0.5, 1.0}) {
        const Durations d{1, b, share * std::min(1.0, b), 1 + b};
        CAPTURE(pp);
        CAPTURE(d.b);
        CAPTURE(d.w);
        const double t_c = d.f + d.b + d.w;
        Durations whole = d;  // B and W as one backward
        whole.b += d.w;
        for (const Case& c : {Case{PipelineSchedule::k1F1B, pp, 1, m}, Case{PipelineSchedule::kGPipe, pp, 1, m},
                              Case{PipelineSchedule::kInterleaved1F1B, pp, 2, m},
                              Case{PipelineSchedule::kZeroBubbleH1, pp, 1, m}}) {
          CAPTURE(std::string(Name(c.schedule)));
          const PipelineOrder o = Build(c.schedule, pp, c.vpp, m);
          const double replayed = Run(o, o.split_backward ? d : whole).step_s - m * c.vpp * t_c;
          CHECK(SchedulePipeline(UniformStepWork(c.schedule, pp, c.vpp, m, d)).bubble_s == doctest::Approx(replayed));
        }
        const double replayed = Run(Build(PipelineSchedule::kDualPipeV, pp, 2, m), d).step_s - m * 2 * t_c;
        const double model = SchedulePipeline(UniformStepWork(PipelineSchedule::kDualPipeV, pp, 2, m, d)).bubble_s;
        CHECK(model >= replayed - 1e-9);
        CHECK(model <= replayed + 0.6 * t_c);
      }
    }
  }
}
