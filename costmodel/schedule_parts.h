// What the pipeline schedule (schedule.h) and the bounds the search prunes
// by (schedule_bound.h) both read: the fill-and-drain bubble of each
// schedule and whether its boundary sends overlap compute. One definition,
// so that a bound and the schedule it bounds cannot drift apart. Internal
// to costmodel/schedule*.cc.
#pragma once

#include <algorithm>

#include "costmodel/stage_work.h"

namespace foldplan::schedule_parts {

// Fill and drain (doc/cost-model.md "Step time", each schedule's order of
// work in sim/pipeline_order.h), from the slowest rank's t_max and its
// compute per micro-batch: F forward, B input-gradient backward (with its
// recomputation), W weight gradients.
//  - 1F1B, GPipe: (pp - 1) x t_max: the first micro-batch's forward fills
//    pp - 1 ranks, the last one's backward drains them; t_max holds one
//    crossing already.
//  - interleaved: (pp - 1) / vpp of a micro-batch's work, plus (pp - 1)
//    crossings each way that nothing hides (the first micro-batch reaches
//    the last rank, the last one's gradient the first).
//  - ZB-H1: 1F1B's with W off the critical path: the drain's backwards
//    carry B only (- W per rank), and a deferred W runs in each of the
//    pp - 1 gaps a rank waits for a backward, filling it up to an F or a B
//    (- min(F, B, W)): (pp - 1)(t_max - W - min(F, B, W)), Qi et al.'s
//    (p - 1)(T_F + T_B - T_W) when W <= min(F, B).
//  - DualPipeV: the last rank idles (pp - 1) chunk-passes' worth: with F, B,
//    W halved per chunk (uniform chunks), (pp - 1)(t_c + max(F_c, B_c) -
//    3 W_c) with t_c = t_max / 2, i.e. (pp - 1) / 2 (t_max + max(F, B) -
//    3 W); exact for F = B = W, otherwise never short and at most 0.6 t_c
//    long (tests/sim_pipeline_order_test.cc replays the order); its sends
//    overlap as interleaved's, so the (pp - 1) crossings are added.
// `r` is the slowest rank (null when there is none), `stage_time_s` its
// t_max. As a function of stage_time_s and crossing_s (r fixed) it is
// non-decreasing, in floating point too (PipelineLowerBound relies on it):
// each reads them only through rounded +, - (of a fixed subtrahend) and x
// by a non-negative factor (pp - 1, (pp - 1) / vpp, (pp - 1) / 2), and
// max(0, .), all monotone.
inline double BubbleSeconds(const StepWork& work, double stage_time_s, const RankWork* r, double crossing_s) {
  const double pp_1 = double(work.pp - 1);
  const double f = r ? r->forward_s : 0;
  const double w = r ? r->weight_grad_s : 0;
  const double b = r ? r->backward_s - w : 0;
  switch (work.schedule) {
    case PipelineSchedule::k1F1B:
    case PipelineSchedule::kGPipe: return pp_1 / work.vpp * stage_time_s;
    case PipelineSchedule::kInterleaved1F1B: return pp_1 / work.vpp * stage_time_s + pp_1 * crossing_s;
    case PipelineSchedule::kZeroBubbleH1: return pp_1 * (stage_time_s - w - std::min({f, b, w}));
    case PipelineSchedule::kDualPipeV:
      return pp_1 / 2 * std::max(0.0, stage_time_s + std::max(f, b) - 3 * w) + pp_1 * crossing_s;
  }
  return 0;
}

// Schedules whose boundary sends overlap the next chunk's compute
// (SchedulePipeline says why).
inline bool OverlapsSends(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::kInterleaved1F1B || schedule == PipelineSchedule::kDualPipeV;
}

}  // namespace foldplan::schedule_parts
