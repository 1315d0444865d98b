// The pipeline schedule, analytically: a step's work (costmodel/stage_work.h)
// in, the time of its pipeline, the exposed part of its data-parallel
// traffic and the micro-batches of activations in flight out. The formulas
// are derived in doc/cost-model.md ("Step time"); in short, for 1F1B and
// interleaved 1F1B over m micro-batches:
//   t_p      = per micro-batch on pipeline rank p: its compute (forward,
//              backward, recomputation) + its exposed communication
//   pipeline = (m + (pp - 1) / vpp) x max_p t_p
//   dp       = max(0, reduce-scatter - backward of one micro-batch)
//            + max(0, all-gather - forward of one micro-batch)
// where per-layer communication is exposed unless overlappable, and then
// only beyond the compute of the layer it overlaps.
#pragma once

#include <vector>

#include "costmodel/stage_work.h"
#include "planner/pipeline.h"

namespace foldplan {

struct RankTime {
  double compute_s = 0;       // forward + backward (recomputation included)
  double exposed_comm_s = 0;  // communication not hidden behind that compute
  double total_s() const { return compute_s + exposed_comm_s; }  // t_p
};

struct PipelineTimes {
  std::vector<RankTime> ranks;  // pp
  int slowest = 0;              // the rank with t_max (the first of equals)
  double stage_time_s = 0;      // t_max
  double bubble_s = 0;          // fill and drain: (pp - 1) / vpp x t_max
  double pipeline_s = 0;        // m x t_max + bubble
};

PipelineTimes SchedulePipeline(const StepWork& work);

// Data-parallel traffic (the per-step ops) hidden behind the slowest rank's
// backward (gradient reductions) and forward (parameter all-gathers) of one
// micro-batch.
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
// divided by vpp (each chunk holds 1/vpp of the stage's layers).
double InflightMicrobatches(PipelineSchedule schedule, int pp, int vpp, int stage, long long microbatches);

}  // namespace foldplan
