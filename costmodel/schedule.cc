#include "costmodel/schedule.h"

#include <algorithm>

namespace foldplan {
namespace {

// Per-layer communication of `count` blocks of `kind`: exposed unless
// overlappable, and then only beyond the compute of the block it overlaps.
double ExposedInBlocks(const StepWork& work, BlockKind kind, int count) {
  if (count == 0) return 0;
  double exposed = 0, hidden = 0;
  for (const CommOp& op : work.ops) {
    if (!work.Runs(op, kind)) continue;
    (op.overlappable ? hidden : exposed) += op.seconds_per_microbatch();
  }
  return count * (exposed + std::max(0.0, hidden - work.cost(kind).total_s()));
}

}  // namespace

PipelineTimes SchedulePipeline(const StepWork& work) {
  PipelineTimes t;
  t.ranks.resize(work.ranks.size());
  for (size_t p = 0; p < work.ranks.size(); ++p) {
    const RankWork& r = work.ranks[p];
    RankTime& rt = t.ranks[p];
    rt.compute_s = r.compute_s();
    for (BlockKind kind : {BlockKind::kDenseLayer, BlockKind::kMoeLayer, BlockKind::kMtpLayer}) {
      rt.exposed_comm_s += ExposedInBlocks(work, kind, r.count(kind));
    }
    // Stage-boundary sends are exposed: Megatron overlaps them only partly.
    if (r.boundary_crossings > 0) {
      for (const CommOp& op : work.ops) {
        if (op.scope == CommOp::kPerStageBoundary) {
          rt.exposed_comm_s += r.boundary_crossings * op.seconds_per_microbatch();
        }
      }
    }
  }
  for (size_t p = 1; p < t.ranks.size(); ++p) {
    if (t.ranks[p].total_s() > t.ranks[static_cast<size_t>(t.slowest)].total_s()) t.slowest = static_cast<int>(p);
  }
  const PipelineDescription& pipe = work.pipeline;
  t.stage_time_s = t.ranks.empty() ? 0 : t.ranks[static_cast<size_t>(t.slowest)].total_s();
  t.bubble_s = double(pipe.pp - 1) / pipe.vpp * t.stage_time_s;
  t.pipeline_s = double(work.microbatches) * t.stage_time_s + t.bubble_s;
  return t;
}

DataParallelTimes DataParallelExposure(const StepWork& work, const PipelineTimes& times) {
  DataParallelTimes dp;
  for (const CommOp& op : work.ops) {
    if (op.scope != CommOp::kPerStep) continue;
    (op.collective == Collective::kAllGather ? dp.gather_s : dp.reduce_s) += op.seconds_per_microbatch();
  }
  if (work.ranks.empty()) return dp;
  const RankWork& worst = work.ranks[static_cast<size_t>(times.slowest)];
  dp.exposed_s = std::max(0.0, dp.reduce_s - worst.backward_s) + std::max(0.0, dp.gather_s - worst.forward_s);
  return dp;
}

double InflightMicrobatches(PipelineSchedule schedule, int pp, int vpp, int stage, long long microbatches) {
  pp = std::max(1, pp);
  vpp = std::max(1, vpp);
  const long long m = std::max(1LL, microbatches);
  if (schedule == PipelineSchedule::k1F1B || vpp == 1) {
    // 1F1B: pp - stage - 1 warm-up forwards, then one more before the first backward.
    return double(std::min<long long>(pp - stage, m));
  }
  // Megatron's interleaved schedule: (pp - stage - 1) x 2 + (vpp - 1) x pp
  // warm-up chunks, + 1 in steady state, capped at all m x vpp chunks.
  const long long chunks = 2LL * (pp - stage - 1) + (vpp - 1LL) * pp + 1;
  return double(std::min(chunks, m * vpp)) / vpp;
}

}  // namespace foldplan
