#include "costmodel/schedule.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

#include "costmodel/schedule_parts.h"

namespace foldplan {
namespace {

using schedule_parts::BubbleSeconds;
using schedule_parts::OverlapsSends;

// Micro-batches whose forward or backward runs alone on pipeline rank p
// (beside no backward or forward of another micro-batch), at most m:
//  - 1F1B, interleaved: the warm-up forwards and one more (the last one
//    before the first backward), mirrored by as many cool-down backwards.
//    That is the count in flight at the peak (InflightMicrobatches: 1F1B
//    pp - p; interleaved its warm-up chunks + 1 over vpp chunks each);
//  - ZB-H1: 1F1B's (the same forwards and backwards; W's only move);
//  - GPipe: all m (no forward runs between backwards);
//  - DualPipeV: the chunk passes outside its F&B pairs, 3 pp - p - 1
//    forwards and as many backwards (the last rank one more of each: it
//    runs its first pair apart), of its 2 chunks.
double LoneMicrobatches(const StepWork& work, int p) {
  const long long m = std::max(1LL, work.microbatches);
  switch (work.schedule) {
    case PipelineSchedule::k1F1B:
    case PipelineSchedule::kInterleaved1F1B: break;
    case PipelineSchedule::kZeroBubbleH1: return InflightMicrobatches(PipelineSchedule::k1F1B, work.pp, 1, p, m);
    case PipelineSchedule::kGPipe: return double(m);
    case PipelineSchedule::kDualPipeV: {
      const long long lone = 3LL * work.pp - p - 1 + (p == work.pp - 1 ? 1 : 0);
      return std::min(double(m), lone / 2.0);
    }
  }
  return InflightMicrobatches(work.schedule, work.pp, work.vpp, p, m);
}

// Schedules that run the weight gradients as passes of their own (sim/
// pipeline_order.h split_backward): a pair's backward holds none.
bool WeightGradApart(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::kZeroBubbleH1 || schedule == PipelineSchedule::kDualPipeV;
}

// The compute a steady pair of `kind` runs beside each EP all-to-all: the
// forward of one micro-batch and the backward of another interleaved at
// sub-layer granularity as Megatron's combined 1F1B schedule runs them
// (doc/cost-model.md "EP overlap, phase by phase"), from the block's
// experts' share X (StepWork::experts) and the rest, its attention side:
//   [0] the forward's attention, F - X_f, beside the backward's combine
//       gradient;
//   [1] the backward's experts, their input gradients and recomputation,
//       X_b + X_r - X_w, beside the forward's dispatch;
//   [2] the forward's experts and the backward's deferred expert weight
//       gradients (--delay-wgrad-compute), X_f + X_w, beside the backward's
//       dispatch gradient;
//   [3] the backward's attention, B + R - X_b - X_r, beside the forward's
//       combine.
// Under ZB-H1 and DualPipeV the weight gradients run as passes of their
// own, outside the pair: [2] holds X_f only and [3] lacks the attention's
// W - X_w. Each share is clamped into its pass (a work assembled by hand
// may give any), so the four never sum above the block's W = F + B + R.
std::array<double, 4> PairPhases(const StepWork& work, BlockKind kind) {
  const BlockCost& c = work.cost(kind);
  const BlockCost& x = work.experts_cost(kind);
  const auto clamp = [](double v, double hi) { return std::min(std::max(v, 0.0), hi); };
  const bool apart = WeightGradApart(work.schedule);
  const double forward = c.forward_s, backward = c.backward_s + c.recompute_s;
  const double experts_forward = clamp(x.forward_s, forward);
  const double experts_backward = clamp(x.backward_s + x.recompute_s, backward);
  const double experts_wgrad = clamp(x.weight_grad_s, experts_backward);
  const double attention_wgrad = clamp(c.weight_grad_s - x.weight_grad_s, backward - experts_backward);
  return {forward - experts_forward, experts_backward - experts_wgrad,
          experts_forward + (apart ? 0 : experts_wgrad),
          backward - experts_backward - (apart ? attention_wgrad : 0)};
}

// Per-layer communication of one block of `kind` on a rank whose share of
// micro-batches running alone (not paired with another's) is `lone`:
//  - plain ops are exposed;
//  - overlappable ops hide behind the block's compute W;
//  - EP-overlap ops (hides_behind_other_microbatch) hide, in the steady
//    state, each call behind the one phase of the other micro-batch's pass
//    it runs beside (PairPhases: a_i seconds of all-to-all beside C_i of
//    compute, i = 0..3), of which the overlappable ops leave the share
//    W_left / W, W_left = max(0, W - overlappable), on the SMs their
//    kernels leave: compute beside a kernel holding n of the GPU's N SMs
//    runs at 1/k, k = N / (N - n), so phase i runs
//    a_i + max(0, C'_i - a_i / k) and its all-to-all exposes
//    a_i - min(C'_i, a_i / k), C'_i = C_i W_left / W. The steady exposure
//    is the sum over the four phases, at least max(0, a - W_left) (a the
//    sum of the a_i, the four C_i at most W). Alone (warm-up, cool-down)
//    they are exposed.
// Only the last point depends on the rank (through `lone`): BlockComm holds
// the rest, summed once per block kind.
struct BlockComm {
  double exposed = 0;     // plain ops
  double hidden = 0;      // overlappable ops
  double excess = 0;      // of which the block's compute cannot hide
  double paired = 0;      // EP-overlap ops
  double paired_fwd = 0;  // of which their forward calls
  double steady = 0;      // of which exposed in the steady state
};

// Every block kind's BlockComm from its plan's sums and its compute.
std::array<BlockComm, kBlockKindCount> BlockComms(const StepWork& work, const PlanSums& plan) {
  std::array<BlockComm, kBlockKindCount> comm;
  for (BlockKind kind : kAllBlockKinds) {
    const auto i = static_cast<size_t>(kind);
    const PlanSums::Block& s = plan.blocks[i];
    BlockComm& b = comm[i];
    b.exposed = s.exposed_s;
    b.hidden = s.hidden_s;
    b.paired = s.paired_s;
    const double w = work.cost(kind).total_s();
    b.excess = std::max(0.0, b.hidden - w);
    if (b.paired > 0) {
      b.paired_fwd = s.dispatch_fwd_s + s.combine_fwd_s;
      const int sms = s.paired_sms;
      const double w_left = std::max(0.0, w - b.hidden);
      const double k = sms > 0 && sms < work.gpu_sms ? double(work.gpu_sms) / (work.gpu_sms - sms) : 1.0;
      const double left = w > 0 ? w_left / w : 0;
      const std::array<double, 4> phase = PairPhases(work, kind);
      const std::array<double, 4> a = {s.combine_bwd_s, s.dispatch_fwd_s, s.dispatch_bwd_s, s.combine_fwd_s};
      for (size_t p = 0; p < 4; ++p) b.steady += a[p] - std::min(phase[p] * left, a[p] / k);
    }
  }
  return comm;
}

// The EP-overlap ops' exposed seconds per block at `lone`.
double PairedExposed(const BlockComm& c, double lone) {
  return c.paired > 0 ? lone * c.paired + (1 - lone) * c.steady : 0;
}

// Exposed seconds of `count` blocks.
double ExposedInBlocks(const BlockComm& c, double lone, int count) {
  return count * (c.exposed + c.excess + PairedExposed(c, lone));
}

// The host's exposure in one block of `kind` (host_time.h): per pass, the
// GPU runs the pass's compute and its exposed communication while the host
// issues the pass's launches, running ahead as far as it can; the pass
// takes the longer of the two, and each sync adds the GPU time it leaves
// idle (the host waits for the queue to drain, then the GPU for the next
// launch). A pass alone exposes max(0, C - G) with G its compute, its plain
// ops' calls, its EP-overlap ops' calls (all exposed alone) and the
// overlappable ops' excess as its compute is of the block's. In a steady
// pair (EP overlap; the rank's 1 - lone share) one CPU thread issues both
// passes, C_f + C_b, while the GPU runs the pair, G_pair = the block's
// compute, plain ops, excess and the EP-overlap ops' steady exposure:
// max(0, C_f + C_b - G_pair).
struct HostExposure {
  double exposed_s = 0;
  double host_s = 0;
  double launches = 0;
  double syncs = 0;
};
HostExposure HostInBlock(const StepWork& work, BlockKind kind, const PlanSums::Block& sums, const BlockComm& c,
                         double lone) {
  const HostBlock& h = work.host.of(kind);
  HostExposure e;
  e.host_s = h.forward.host_s + h.backward.host_s;
  e.launches = h.forward.launches + h.backward.launches;
  e.syncs = h.forward.syncs + h.backward.syncs;
  if (e.host_s <= 0 && e.syncs <= 0) return e;
  const BlockCost& cost = work.cost(kind);
  const double forward = cost.forward_s, backward = cost.backward_s + cost.recompute_s;
  const double compute = forward + backward;
  const double excess_forward = compute > 0 ? c.excess * forward / compute : 0;
  const double gpu_forward = forward + sums.exposed_fwd_s + excess_forward + c.paired_fwd;
  const double gpu_backward =
      backward + (c.exposed - sums.exposed_fwd_s) + (c.excess - excess_forward) + (c.paired - c.paired_fwd);
  double exposed = std::max(0.0, h.forward.host_s - gpu_forward) + std::max(0.0, h.backward.host_s - gpu_backward);
  if (c.paired > 0) {
    const double gpu_pair = compute + c.exposed + c.excess + c.steady;
    exposed = lone * exposed + (1 - lone) * std::max(0.0, e.host_s - gpu_pair);
  }
  e.exposed_s = exposed + e.syncs * work.host.sync_s;
  return e;
}

// Adds to share[i] the exposed seconds of op i in `count` blocks of `kind`
// (overlappable ops share their excess pro rata, EP-overlap ops theirs).
void ShareOfBlocks(const StepWork& work, BlockKind kind, const BlockComm& c, double lone, int count,
                   std::vector<double>& share) {
  const double paired_exposed = PairedExposed(c, lone);
  for (size_t i = 0; i < work.ops.size(); ++i) {
    const CommOp& op = work.ops[i];
    if (!work.Runs(op, kind)) continue;
    const double a = op.seconds_per_microbatch();
    double e = a;
    if (op.hides_behind_other_microbatch) e = a / c.paired * paired_exposed;
    else if (op.overlappable) e = a / c.hidden * c.excess;
    share[i] += count * e;
  }
}

// Whether ranks a and b read the same of their work in SchedulePipeline:
// their compute (as summed), block counts and boundary crossings.
bool SameTimeInputs(const RankWork& a, const RankWork& b) {
  // The counts one by one: std::array's == calls memcmp for these five ints.
  for (size_t k = 0; k < kBlockKindCount; ++k) {
    if (a.blocks[k] != b.blocks[k]) return false;
  }
  return a.boundary_crossings == b.boundary_crossings &&
         std::bit_cast<uint64_t>(a.compute_s()) == std::bit_cast<uint64_t>(b.compute_s());
}

// SchedulePipeline: each rank's time, the slowest, the bubble; returns the
// block kinds' communication it read.
std::array<BlockComm, kBlockKindCount> Schedule(const StepWork& work, const PlanSums& plan, PipelineTimes* times) {
  std::vector<RankTime> ranks = std::move(times->ranks);
  ranks.assign(work.ranks.size(), RankTime{});
  *times = PipelineTimes{};
  times->ranks = std::move(ranks);
  PipelineTimes& t = *times;
  const double m = double(work.microbatches);
  const bool overlapped_sends = OverlapsSends(work.schedule);
  // One boundary crossing, forward and backward (each op's calls), each
  // block kind's communication, the data-parallel ops.
  const double crossing_s = plan.crossing_s;
  const std::array<BlockComm, kBlockKindCount> comm = BlockComms(work, plan);
  t.dp_reduce_s = plan.dp_reduce_s;
  t.dp_gather_s = plan.dp_gather_s;
  // A rank's share of lone micro-batches matters only to EP-overlap ops
  // (PairedExposed): without them every rank is given 0.
  const bool paired = std::any_of(comm.begin(), comm.end(), [](const BlockComm& b) { return b.paired > 0; });
  double last_lone = 0;
  double worst = 0;  // t_max so far, of rank t.slowest (the first of equals)
  // A block kind's host exposure reads the rank only through its lone
  // share: without EP-overlap ops, once per kind.
  std::array<HostExposure, kBlockKindCount> host_of{};
  std::array<bool, kBlockKindCount> host_known{};
  for (size_t p = 0; p < work.ranks.size(); ++p) {
    const RankWork& r = work.ranks[p];
    RankTime& rt = t.ranks[p];
    const double lone = paired ? LoneMicrobatches(work, static_cast<int>(p)) / m : 0;
    // Middle ranks often hold alike: one whose time reads what the previous
    // one's did (below: compute, block counts, crossings, lone share) takes
    // that time (never above t_max so far).
    if (p > 0 && lone == last_lone && SameTimeInputs(r, work.ranks[p - 1])) {
      rt = t.ranks[p - 1];
      continue;
    }
    last_lone = lone;
    rt.compute_s = r.compute_s();
    for (BlockKind kind : kAllBlockKinds) {
      const int count = r.count(kind);
      if (count == 0) continue;
      const auto k = static_cast<size_t>(kind);
      rt.exposed_comm_s += ExposedInBlocks(comm[k], lone, count);
      if (paired || !host_known[k]) {
        host_of[k] = HostInBlock(work, kind, plan.blocks[k], comm[k], lone);
        host_known[k] = true;
      }
      const HostExposure& host = host_of[k];
      rt.host_exposed_s += count * host.exposed_s;
      rt.host_s += count * host.host_s;
      rt.launches += count * host.launches;
      rt.syncs += count * host.syncs;
    }
    // Stage boundaries: the rank's vpp chunks each send forward and
    // backward per micro-batch. 1F1B, GPipe and ZB-H1 wait for their sends
    // (Megatron's non-interleaved schedule communicates between its
    // compute steps); the interleaved schedule overlaps them with the next
    // chunk's compute (Megatron's overlap_p2p_comm, on by default there),
    // and DualPipeV in its overlapped pairs (the DeepSeek-V3 report: its
    // all-to-all and pipeline communication hide behind the pair's
    // compute), so only what the compute cannot cover is exposed.
    const double sends = r.boundary_crossings * crossing_s;
    rt.boundary_s =
        overlapped_sends ? std::max(0.0, sends - rt.compute_s - rt.exposed_comm_s - rt.host_exposed_s) : sends;
    const double total = rt.total_s();
    if (p == 0 || total > worst) {
      worst = total;
      t.slowest = static_cast<int>(p);
    }
  }
  t.stage_time_s = worst;
  t.bubble_s = BubbleSeconds(work, t.stage_time_s,
                             work.ranks.empty() ? nullptr : &work.ranks[static_cast<size_t>(t.slowest)], crossing_s);
  t.pipeline_s = m * t.stage_time_s + t.bubble_s;
  return comm;
}

}  // namespace

PlanSums SumPlan(const std::vector<CommOp>& ops, bool mtp_moe, const Recompute& recompute) {
  const auto mtp = static_cast<size_t>(BlockKind::kMtpLayer);
  const unsigned reruns = RerunBlocks(recompute);
  // Each op is added to the sums of every kind it runs in (BlockKindsOf),
  // so each sum still adds its ops in plan order, as a pass per kind
  // would. An MTP module's layer runs the ops of the layer kind it is, so
  // its sums are that kind's, copied rather than added again. A block's
  // sums, by how its ops overlap: plain, overlappable, EP-overlap; and the
  // plain ops' forward calls (the host's exposure splits by pass).
  // [4..7]: the EP-overlap ops' seconds by phase (CommOp::combine): the
  // forward's dispatch and combine, the backward's dispatch and combine
  // gradients (with the forward calls a recomputation repeats, which
  // Megatron never runs with the overlap: a2a_overlap_needs).
  std::array<std::array<double, 8>, kBlockKindCount> block{};
  std::array<int, kBlockKindCount> paired_sms{};
  PlanSums c;
  // The kinds of the last op's scope, but the MTP layer (plans list their
  // ops in runs of one scope).
  CommOp::Scope scope = CommOp::kPerStep;
  unsigned scope_kinds = 0;
  for (const CommOp& op : ops) {
    const double a = SecondsPerMicrobatch(op, reruns);
    if (op.scope != scope) {
      scope = op.scope;
      scope_kinds = BlockKindsOf(scope, mtp_moe) & ~(1u << mtp);
    }
    if (scope_kinds == 0) {
      if (scope == CommOp::kPerStageBoundary) c.crossing_s += a;
      if (scope == CommOp::kPerStep) (op.collective == Collective::kAllGather ? c.dp_gather_s : c.dp_reduce_s) += a;
      continue;
    }
    const size_t way = op.hides_behind_other_microbatch ? 2 : op.overlappable ? 1 : 0;
    const double forward = way != 1 ? op.calls_fwd * op.seconds_per_call : 0;
    // The backward's calls as AddRecomputeCalls counts them (the same bits).
    const double backward =
        way == 2 ? (RepeatsCalls(op, reruns) ? op.calls_bwd + op.rerun_calls : op.calls_bwd) * op.seconds_per_call
                 : 0;
    const size_t phase = op.combine ? 5 : 4;
    for (unsigned kinds = scope_kinds; kinds != 0; kinds &= kinds - 1) {
      const auto k = static_cast<size_t>(std::countr_zero(kinds));
      block[k][way] += a;
      if (way == 0) {
        block[k][3] += forward;
      } else if (way == 2) {
        block[k][phase] += forward;
        block[k][phase + 2] += backward;
        paired_sms[k] = std::max(paired_sms[k], op.sms);
      }
    }
  }
  for (size_t k = 0; k < kBlockKindCount; ++k) {
    const size_t from = k == mtp ? static_cast<size_t>(mtp_moe ? BlockKind::kMoeLayer : BlockKind::kDenseLayer) : k;
    const std::array<double, 8>& b = block[from];
    c.blocks[k] = {b[0], b[3], b[1], b[2], b[4], b[5], b[6], b[7], paired_sms[from]};
  }
  return c;
}

PipelineTimes SchedulePipeline(const StepWork& work, std::vector<double>* op_exposed_s) {
  PipelineTimes t;
  SchedulePipeline(work, &t, op_exposed_s);
  return t;
}

void SchedulePipeline(const StepWork& work, const PlanSums& plan, PipelineTimes* times) {
  Schedule(work, plan, times);
}

void SchedulePipeline(const StepWork& work, PipelineTimes* times, std::vector<double>* op_exposed_s) {
  const PlanSums plan = SumPlan(work.ops, work.mtp_moe, Recompute::None());
  const std::array<BlockComm, kBlockKindCount> comm = Schedule(work, plan, times);
  const PipelineTimes& t = *times;
  if (op_exposed_s && !work.ranks.empty()) {
    // The slowest rank's exposure, op by op.
    op_exposed_s->assign(work.ops.size(), 0.0);
    const RankWork& r = work.ranks[static_cast<size_t>(t.slowest)];
    const RankTime& rt = t.ranks[static_cast<size_t>(t.slowest)];
    const double lone = LoneMicrobatches(work, t.slowest) / double(work.microbatches);
    for (BlockKind kind : kAllBlockKinds) {
      if (r.count(kind) > 0) {
        ShareOfBlocks(work, kind, comm[static_cast<size_t>(kind)], lone, r.count(kind), *op_exposed_s);
      }
    }
    const double sends = r.boundary_crossings * plan.crossing_s;
    for (size_t i = 0; i < work.ops.size(); ++i) {
      if (work.ops[i].scope == CommOp::kPerStageBoundary && sends > 0) {
        (*op_exposed_s)[i] = r.boundary_crossings * work.ops[i].seconds_per_microbatch() / sends * rt.boundary_s;
      }
    }
  }
}

DataParallelTimes DataParallelExposure(const StepWork& work, const PipelineTimes& times) {
  DataParallelTimes dp;
  dp.reduce_s = times.dp_reduce_s;
  dp.gather_s = times.dp_gather_s;
  if (work.ranks.empty()) return dp;
  const RankWork& worst = work.ranks[static_cast<size_t>(times.slowest)];
  dp.exposed_s = std::max(0.0, dp.reduce_s - worst.backward_s) + std::max(0.0, dp.gather_s - worst.forward_s);
  return dp;
}

double InflightMicrobatches(PipelineSchedule schedule, int pp, int vpp, int stage, long long microbatches) {
  pp = std::max(1, pp);
  vpp = std::max(1, vpp);
  const long long m = std::max(1LL, microbatches);
  switch (schedule) {
    case PipelineSchedule::k1F1B:
    case PipelineSchedule::kInterleaved1F1B: break;
    // Every forward before the first backward.
    case PipelineSchedule::kGPipe: return double(m);
    // A micro-batch's activations live until its W (which reads the layer
    // inputs); rank p runs pp - p - 1 warm-up forwards and defers its W's
    // by p, so every rank holds pp.
    case PipelineSchedule::kZeroBubbleH1: return double(std::min<long long>(pp, m));
    // dualpipev.py's steps 1 and 2 run 2 (pp - stage - 1) + 2 (stage + 1)
    // = 2 pp forwards before any backward, step 3 trades each B1 + W for an
    // F1, and step 4's first pair starts a forward before its backward
    // frees one: 2 pp + 1 chunks on every rank, of its 2.
    case PipelineSchedule::kDualPipeV: return double(std::min(2LL * pp + 1, 2 * m)) / 2;
  }
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
