#include "costmodel/schedule_bound.h"

#include <algorithm>
#include <bit>
#include <cstddef>

#include "costmodel/schedule_parts.h"

namespace foldplan {

using schedule_parts::BubbleSeconds;
using schedule_parts::OverlapsSends;

// The proof that this is <= SchedulePipeline(work).pipeline_s for the same
// work with any ops, bit for bit (fl(x) is x rounded to nearest; it is
// monotone, so a <= a', b <= b' give fl(a + b) <= fl(a' + b'), and, for
// a, a', b, b' >= 0, fl(a b) <= fl(a' b')):
//  1. t_max >= C = max_p c_p, c_p = RankWork::compute_s() as
//     SchedulePipeline computes it: t_max is the largest t_p =
//     fl(fl(fl(c_p + e_p) + s_p) + h_p), and e_p (exposed per-layer comm),
//     s_p (boundary sends) and h_p (the host's exposure) are >= 0: sums of
//     op seconds (>= 0) scaled by counts, lone in [0, 1] (lone micro-batches
//     <= m) and 1 - lone, max(0, .), syncs x sync_s, and the EP-overlap
//     steady part, a sum over the pair's four phases of a_i - min(., a_i /
//     k), k >= 1, so fl(a_i / k) <= a_i and each term is >= 0.
//  2. pipeline_s = fl(fl(m t_max) + bubble(t_max, slowest, crossing)), and
//     BubbleSeconds is non-decreasing in t_max and in crossing >= 0, so
//     bubble >= bubble(C, slowest, 0) >= min_p bubble(C, p, 0).
//  3. Hence pipeline_s >= fl(fl(m C) + min_p bubble(C, p, 0)), the bound.
// (The step adds the exposed data-parallel part and the optimizer step,
// both >= 0: the step time is >= pipeline_s too.)
double PipelineLowerBound(const StepWork& work) {
  if (work.ranks.empty()) return 0;
  const double m = double(work.microbatches);
  double c = 0;
  for (const RankWork& r : work.ranks) c = std::max(c, r.compute_s());
  double bubble = BubbleSeconds(work, c, &work.ranks.front(), 0.0);
  for (const RankWork& r : work.ranks) bubble = std::min(bubble, BubbleSeconds(work, c, &r, 0.0));
  return m * c + bubble;
}

// The proof. Each rank's compute c_p of w is at least least's (stage_work.h
// LeastBlocks), so C_w = max_p c_p >= C. 1F1B, GPipe, interleaved:
// PipelineLowerBound is fl(fl(m C) + bubble) with bubble fl(pp_1 / vpp x C)
// (+ pp_1 x 0), the same for every rank, each step monotone in C. DualPipeV:
// its bubble pp_1 / 2 x max(0, .) + pp_1 x 0 is >= 0, so w's bound
// fl(fl(m C_w) + bubble) >= fl(m C_w) >= fl(m C). ZB-H1: its bubble
// pp_1 (C_w - w - min(f, b, w)) is >= 0 in real numbers (C_w >= f + b + w
// on every rank), and in floating point errs below 0 by a few units in the
// last place of C_w times pp_1, under 1e-9 of m C_w for any pp under 10^6.
double LeastPipelineLowerBound(const StepWork& least) {
  constexpr double kRoundingMargin = 1e-9;  // relative; ZB-H1 only, see the proof
  switch (least.schedule) {
    case PipelineSchedule::k1F1B:
    case PipelineSchedule::kGPipe:
    case PipelineSchedule::kInterleaved1F1B: return PipelineLowerBound(least);
    case PipelineSchedule::kZeroBubbleH1:
    case PipelineSchedule::kDualPipeV: break;
  }
  double c = 0;
  for (const RankWork& r : least.ranks) c = std::max(c, r.compute_s());
  const double bound_s = double(least.microbatches) * c;
  return least.schedule == PipelineSchedule::kZeroBubbleH1 ? bound_s * (1 - kRoundingMargin) : bound_s;
}

CommSeconds CommSecondsOf(const StepWork& work) { return CommSecondsOf(work.ops, work.mtp_moe); }

CommSeconds CommSecondsOf(const std::vector<CommOp>& ops, bool mtp_moe) {
  CommSeconds s;
  for (const CommOp& op : ops) {
    const double a = op.seconds_per_microbatch();
    if (op.scope == CommOp::kPerStageBoundary) s.crossing_s += a;
    for (unsigned kinds = BlockKindsOf(op.scope, mtp_moe); kinds != 0; kinds &= kinds - 1) {
      s.block_s[static_cast<size_t>(std::countr_zero(kinds))] += a;
    }
  }
  return s;
}

// The proof, in real numbers. For a work w as the header says,
// SchedulePipeline gives rank p t_p = c_p + e_p + s_p + h_p, h_p >= 0 (the
// host's exposure), with e_p = sum_k n_pk X_k, a block's exposure being
// (BlockComms)
//   X = exposed + max(0, hidden - W) + paired',
//   paired' = lone paired + (1 - lone) steady, lone in [0, 1],
//   steady = sum_i a_i - min(C_i w_left / W, a_i / k), k >= 1,
//   w_left = max(0, W - hidden), over the pair's four phases, whose a_i sum
//   to paired (each EP-overlap call is in one) and whose C_i sum to at most
//   W (PairPhases clamps each share into its pass),
// so steady >= max(0, paired - w_left) and paired' >= steady. When
// hidden >= W, X >= exposed + (hidden - W) + paired = T - W; otherwise
// X >= exposed + paired - (W - hidden) = T - W. With X >= 0:
// X_k >= max(0, T_k - W_k) >= max(0, F_k - W_k), F = floor.block_s. The
// sends: 1F1B, GPipe and ZB-H1 wait for them, s_p = crossings x crossing
// >= crossings x floor.crossing_s; interleaved and DualPipeV expose only
// what the compute does not cover, so t_p = max(c_p + e_p, sends). Either
// way t_p >= t'_p as computed below, hence t_max >= C' = max_p t'_p, and as
// in PipelineLowerBound (BubbleSeconds is non-decreasing in the stage time
// and the crossing) pipeline_s >= m C' + min_p bubble(C', p, floor.crossing_s).
// Rounding: both sides are sums, products, maxima and minima of
// non-negative terms, and differences, over at most a few hundred
// operations whose terms are no larger than the result (sum_k n_pk T_k <=
// c_p + sum_k n_pk max(0, T_k - W_k)); each operation errs by at most
// u = 2^-53 of its operands, so either side strays from its real value by
// under 1e-13 of the result, well inside the margin.
double PipelineLowerBound(const StepWork& work, const CommSeconds& floor) {
  constexpr double kRoundingMargin = 1e-9;  // relative; see the proof
  if (work.ranks.empty()) return 0;
  const bool overlapped_sends = OverlapsSends(work.schedule);
  double c = 0;
  for (const RankWork& r : work.ranks) {
    double t = r.compute_s();
    for (BlockKind kind : kAllBlockKinds) {
      const int n = r.count(kind);
      const double uncovered = floor.block_s[static_cast<size_t>(kind)] - work.cost(kind).total_s();
      if (n > 0 && uncovered > 0) t += n * uncovered;
    }
    const double sends = r.boundary_crossings * floor.crossing_s;
    t = overlapped_sends ? std::max(t, sends) : t + sends;
    c = std::max(c, t);
  }
  double bubble = BubbleSeconds(work, c, &work.ranks.front(), floor.crossing_s);
  for (const RankWork& r : work.ranks) bubble = std::min(bubble, BubbleSeconds(work, c, &r, floor.crossing_s));
  return (double(work.microbatches) * c + bubble) * (1 - kRoundingMargin);
}

// The proof (fl monotone as above): BuildStepWork gives rank p
// backward_s = sum over kinds of fl(n fl(b + r)) with r the block's
// recompute_s and n >= 0, and forward_s, weight_grad_s free of r; so
// backward_s, c_p = fl(forward_s + backward_s) and C = max_p c_p do not
// fall as each r grows. PipelineLowerBound is fl(fl(m C) + min_p
// bubble(C, p, 0)), and BubbleSeconds, for 1F1B and GPipe (C times a
// factor >= 0), interleaved (the same, + 0) and DualPipeV (its b =
// fl(backward_s - w) and max(f, b) grow with backward_s, then + C, - 3 w,
// max(0, .) and x (pp - 1) / 2 are monotone), does not fall as C and the
// rank's backward_s grow; a min over ranks of such is monotone too. ZB-H1's
// - min(f, b, w) falls as b grows.
bool LowerBoundGrowsWithRecompute(PipelineSchedule schedule) {
  // A switch with no default: a new schedule is a compiler warning here
  // until its bubble is checked against the proof.
  switch (schedule) {
    case PipelineSchedule::k1F1B:
    case PipelineSchedule::kGPipe:
    case PipelineSchedule::kInterleaved1F1B:
    case PipelineSchedule::kDualPipeV: return true;
    case PipelineSchedule::kZeroBubbleH1: return false;
  }
  return false;
}

}  // namespace foldplan
