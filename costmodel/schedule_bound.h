// The bounds the search prunes by (CostModel::Score, ScoreFamily): lower
// bounds on SchedulePipeline's pipeline time (schedule.h) from a layout's
// compute alone, from its compute and a floor on its communication, and
// for a whole family of layouts at once. Each is proven against the
// schedule's formulas beside its definition; none is a cost: nothing but
// pruning may read them.
#pragma once

#include <array>
#include <vector>

#include "costmodel/block_kind.h"
#include "costmodel/comm_plan.h"
#include "costmodel/stage_work.h"
#include "planner/pipeline.h"

namespace foldplan {

// A lower bound on SchedulePipeline(work).pipeline_s, bit for bit in
// floating point, from the ranks' compute alone (work.ops is not read, so
// it may be empty): m x the largest rank compute + the least bubble that
// compute allows (the proof is beside the definition). What the search
// prunes by (CostModel::Score). It reads the ranks only through a max and
// a min over them: their order and repeats do not change it (a work of one
// rank of each shape gives it too).
double PipelineLowerBound(const StepWork& work);

// A lower bound on PipelineLowerBound(w) of every work w on `least`'s
// pipeline, schedule and micro-batches whose ranks' forward_s and
// backward_s are each at least `least`'s (BuildLeastStepWork's work: w any
// of its computes' works under any recompute set). Under 1F1B, GPipe and
// the interleaved schedule the bubble reads the largest rank compute C
// alone (and the crossing, 0 here), so it is PipelineLowerBound(least),
// bit for bit below; under ZB-H1 and DualPipeV, whose bubbles read the
// rank's F, B and W, it is m C without the bubble (proof beside the
// definition), scaled down by a relative 1e-9 for ZB-H1's rounding. Use it
// to prune only.
double LeastPipelineLowerBound(const StepWork& least);

// What a work's ops take per micro-batch, before the schedule decides what
// hides: per block kind, the seconds of every op that runs in one block of
// that kind (exposed, overlappable and EP-overlap ops alike; T_k below), and
// one stage-boundary crossing's, forward and backward. Reads work.ops and
// work.mtp_moe only.
struct CommSeconds {
  std::array<double, kBlockKindCount> block_s{};  // indexed by BlockKind
  double crossing_s = 0;
};
CommSeconds CommSecondsOf(const StepWork& work);
// The same of a plan's ops, an MTP module's layer a MoE layer when `mtp_moe`.
CommSeconds CommSecondsOf(const std::vector<CommOp>& ops, bool mtp_moe);

// A lower bound on SchedulePipeline(w).pipeline_s for every work w with
// `work`'s compute (its ranks, block costs, m and schedule) whose ops take,
// per block of kind k, at least floor.block_s[k] and, per crossing, at least
// floor.crossing_s (CommSecondsOf(w) at least `floor`, field by field).
// Whatever of a block's T_k its own compute W_k cannot cover is exposed
// however the ops overlap, so each rank waits at least
//   t_p >= c_p + sum_k n_pk max(0, T_k - W_k)   (+ its sends, by schedule);
// the proof is beside the definition. `work.ops` is not read. Real-number
// arithmetic proves it; the result is scaled down by a relative 1e-9 so
// that rounding (at most ~1e-13 relative here) cannot lift it above the
// schedule's own floating-point result. Unlike PipelineLowerBound it is
// not bit-comparable: use it to prune only.
double PipelineLowerBound(const StepWork& work, const CommSeconds& floor);

// Whether, under `schedule`, PipelineLowerBound never falls as the
// recomputation grows, bit for bit: of two works built alike
// (BuildStepWork) from compute times that differ only in their layers'
// recompute_s, the one with every recompute_s at least the other's has the
// larger or equal bound. True for every schedule but ZB-H1, whose bubble
// subtracts min(F, B, W): B of a rank that is not the slowest can grow
// while t_max does not. What lets the search prune a layout's every
// recompute mode by the bound of its layout without recomputation
// (CostModel::ScoreFamily). The proof is beside the definition.
bool LowerBoundGrowsWithRecompute(PipelineSchedule schedule);

}  // namespace foldplan
