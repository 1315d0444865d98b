// The pipeline schedule, analytically: a step's work (costmodel/stage_work.h)
// in, the time of its pipeline, the exposed part of its data-parallel
// traffic and the micro-batches of activations in flight out. The formulas
// are derived in doc/cost-model.md ("Step time") from each schedule's order
// of work (sim/pipeline_order.h); in short, over m micro-batches, with
// s = one boundary crossing's forward and backward send and F, B, W the
// slowest rank's forward, input-gradient backward (with recomputation)
// and weight-gradient seconds per micro-batch:
//   t_p      = per micro-batch on pipeline rank p: its compute (forward,
//              backward, recomputation) + its exposed per-layer
//              communication + its boundary sends (1F1B, GPipe, ZB-H1: s,
//              exposed; interleaved, DualPipeV: vpp x s, exposed beyond its
//              compute) + its host's exposure: per block and pass
//              max(0, host time - the pass's GPU time) (in an EP-overlap
//              pair, per block max(0, both passes' host time - the pair's
//              GPU time)) + syncs x the GPU time a sync leaves idle
//              (host_time.h)
//   pipeline = m x max_p t_p + bubble,
//   bubble   = 1F1B, GPipe:  (pp - 1) x t_max
//              interleaved:  (pp - 1) / vpp x t_max + (pp - 1) x s
//              ZB-H1:        (pp - 1) x (t_max - W - min(F, B, W))
//              DualPipeV:    (pp - 1) / 2 x (t_max + max(F, B) - 3 W) + (pp - 1) x s
//   dp       = max(0, reduce-scatter - backward of one micro-batch)
//            + max(0, all-gather - forward of one micro-batch)
// where per-layer communication is exposed unless overlappable (then only
// beyond the compute of the layer it overlaps), and EP-overlap ops hide in
// the steady state only, each all-to-all behind the one phase of the other
// micro-batch's pass it runs beside (attention or experts, doc/cost-model.md
// "EP overlap, phase by phase"); there one host thread issues both passes.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "costmodel/stage_work.h"
#include "planner/pipeline.h"

namespace foldplan {

struct RankTime {
  double compute_s = 0;       // forward + backward (recomputation included)
  double exposed_comm_s = 0;  // per-layer communication not hidden behind compute
  double boundary_s = 0;      // stage-boundary sends not hidden
  // The host's share (host_time.h): per block and pass, what its launches
  // take beyond the pass's GPU time, and the GPU time its syncs leave idle.
  double host_exposed_s = 0;
  double host_s = 0;          // the host's time issuing the rank's passes (exposed or not)
  double launches = 0;        // host launches per micro-batch (a graph replay is one)
  double syncs = 0;           // host waits for the GPU per micro-batch
  double total_s() const { return compute_s + exposed_comm_s + boundary_s + host_exposed_s; }  // t_p
};

struct PipelineTimes {
  std::vector<RankTime> ranks;  // pp
  int slowest = 0;              // the rank with t_max (the first of equals)
  double stage_time_s = 0;      // t_max
  double bubble_s = 0;          // fill and drain, by schedule (above)
  double pipeline_s = 0;        // m x t_max + bubble
  // The per-step ops' seconds in plan order, gradient reductions and
  // parameter all-gathers (DataParallelExposure's reduce_s and gather_s),
  // summed in the schedule's pass over the ops.
  double dp_reduce_s = 0;
  double dp_gather_s = 0;
};

// When `op_exposed_s` is given it receives, per op of work.ops, the seconds
// per micro-batch the slowest rank waits on it (an overlappable op's share
// of what its block could not hide; 0 for per-step ops).
PipelineTimes SchedulePipeline(const StepWork& work, std::vector<double>* op_exposed_s = nullptr);
// The same into *times (replaced; its storage kept).
void SchedulePipeline(const StepWork& work, PipelineTimes* times, std::vector<double>* op_exposed_s = nullptr);

// What the schedule reads of a plan, summed in one pass over its ops in
// plan order: per block kind, the seconds per block of its plain,
// overlappable and EP-overlap ops (these also by the phase each call runs
// in) and the most SMs an EP-overlap op holds (an MTP module's layer: those
// of the layer kind it is); one boundary crossing's seconds, forward and
// backward; the per-step ops' (gradient reductions, parameter all-gathers).
struct PlanSums {
  struct Block {
    double exposed_s = 0;      // plain ops
    double exposed_fwd_s = 0;  // of which their forward calls
    double hidden_s = 0;       // overlappable ops
    double paired_s = 0;       // EP-overlap ops
    // Of paired_s, by CommOp::combine: the forward calls of the dispatch's
    // and the combine's ops, and their backward calls (the dispatch's and
    // the combine's gradients, with the forward calls a recomputation
    // repeats).
    double dispatch_fwd_s = 0;
    double combine_fwd_s = 0;
    double dispatch_bwd_s = 0;
    double combine_bwd_s = 0;
    int paired_sms = 0;
  };
  std::array<Block, kBlockKindCount> blocks;  // indexed by BlockKind
  double crossing_s = 0;
  double dp_reduce_s = 0;
  double dp_gather_s = 0;
};
// The sums of `ops` with the forward calls `recompute` repeats counted in
// (comm_plan.h SecondsPerMicrobatch): bit for bit those of the ops after
// AddRecomputeCalls(recompute), so that one plan without recomputation
// serves each recompute set of its layout uncopied.
PlanSums SumPlan(const std::vector<CommOp>& ops, bool mtp_moe, const Recompute& recompute);

// SchedulePipeline(work) with its plan's sums given: work.ops is not read.
void SchedulePipeline(const StepWork& work, const PlanSums& plan, PipelineTimes* times);

// Data-parallel traffic (the per-step ops) hidden behind the slowest rank's
// backward (gradient reductions) and forward (parameter all-gathers) of one
// micro-batch. `times` is SchedulePipeline(work)'s.
struct DataParallelTimes {
  double reduce_s = 0;   // gradient reduce-scatter or all-reduce
  double gather_s = 0;   // parameter all-gather
  double exposed_s = 0;
};
DataParallelTimes DataParallelExposure(const StepWork& work, const PipelineTimes& times);

// Micro-batches (in whole-stage equivalents) whose activations are alive on
// pipeline rank `stage` at the peak. 1F1B: pp - stage - 1 warm-up forwards
// and one more before the first backward, min(pp - stage, m). Interleaved:
// model chunks in flight min(2 (pp - stage - 1) + (vpp - 1) pp + 1, m vpp),
// divided by vpp (each chunk holds 1/vpp of the stage's layers). GPipe: m.
// ZB-H1: min(pp, m) on every rank (activations live until their W, and
// rank p defers its W's by p). DualPipeV: 2 pp + 1 chunks (at most 2 m) of
// its 2, pp + 1/2 on every rank.
double InflightMicrobatches(PipelineSchedule schedule, int pp, int vpp, int stage, long long microbatches);

}  // namespace foldplan
