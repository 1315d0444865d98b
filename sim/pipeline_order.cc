#include "sim/pipeline_order.h"

#include <algorithm>
#include <deque>
#include <string>
#include <utility>

namespace foldplan {
namespace {

using Passes = std::vector<PipelinePass>;

PipelinePass Pass(PassKind kind, long long microbatch, int chunk) {
  return {kind, static_cast<int>(microbatch), chunk, false};
}

Status Needs(PipelineSchedule schedule, const std::string& what) {
  return Status::Error(std::string("pipeline schedule ") + Name(schedule) + " needs " + what);
}

Passes GPipeRank(long long m) {
  Passes out;
  for (long long i = 0; i < m; ++i) out.push_back(Pass(PassKind::kForward, i, 0));
  for (long long i = 0; i < m; ++i) out.push_back(Pass(PassKind::kBackward, i, 0));
  return out;
}

// Megatron's 1F1B on rank p. With `split` every B gets a W, deferred while
// no more than `lag` B's are without one (ZB-H1: lag = p).
Passes OneFOneBRank(int pp, int p, long long m, bool split, long long lag) {
  Passes out;
  const long long warmup = std::min<long long>(pp - p - 1, m);
  long long w_done = 0, b_done = 0;
  auto backward = [&] {
    out.push_back(Pass(PassKind::kBackward, b_done++, 0));
    if (!split) return;
    for (; w_done < b_done - lag; ++w_done) out.push_back(Pass(PassKind::kWeightGrad, w_done, 0));
  };
  for (long long i = 0; i < warmup; ++i) out.push_back(Pass(PassKind::kForward, i, 0));
  for (long long i = warmup; i < m; ++i) {
    out.push_back(Pass(PassKind::kForward, i, 0));
    backward();
  }
  while (b_done < m) backward();
  if (split) {
    for (; w_done < m; ++w_done) out.push_back(Pass(PassKind::kWeightGrad, w_done, 0));
  }
  return out;
}

// Megatron's interleaved schedule on rank p (m % pp == 0): the k-th pass
// of each direction is micro-batch (k / (pp vpp)) pp + k % pp on chunk
// (k / pp) % vpp, reversed for backwards.
Passes InterleavedRank(int pp, int vpp, int p, long long m) {
  const long long total = m * vpp;
  const long long group = static_cast<long long>(pp) * vpp;
  auto microbatch = [&](long long k) { return (k / group) * pp + k % pp; };
  auto chunk = [&](long long k) { return static_cast<int>((k / pp) % vpp); };
  const long long warmup = std::min(2LL * (pp - p - 1) + (vpp - 1LL) * pp, total);
  Passes out;
  long long f = 0, b = 0;
  auto forward = [&] { out.push_back(Pass(PassKind::kForward, microbatch(f), chunk(f))), ++f; };
  auto backward = [&] { out.push_back(Pass(PassKind::kBackward, microbatch(b), vpp - 1 - chunk(b))), ++b; };
  while (f < warmup) forward();
  while (f < total) forward(), backward();
  while (b < total) backward();
  return out;
}

// dualpipev.py's step() on rank p: the eight steps of the header. The
// weight-gradient queue is FIFO like its WeightGradStore.
Passes DualPipeVRank(int pp, int p, long long m) {
  Passes out;
  long long next_f[2] = {0, 0}, next_b[2] = {0, 0};
  std::deque<std::pair<long long, int>> deferred;  // (micro-batch, chunk) whose W waits
  auto F = [&](int c, bool paired = false) {
    PipelinePass pass = Pass(PassKind::kForward, next_f[c]++, c);
    pass.paired_with_next = paired;
    out.push_back(pass);
  };
  auto B = [&](int c, bool defer_w = false) {
    const long long mb = next_b[c]++;
    out.push_back(Pass(PassKind::kBackward, mb, c));
    if (defer_w) deferred.emplace_back(mb, c);
    else out.push_back(Pass(PassKind::kWeightGrad, mb, c));
  };
  auto W = [&] {
    out.push_back(Pass(PassKind::kWeightGrad, deferred.front().first, deferred.front().second));
    deferred.pop_front();
  };
  auto FB = [&](int forward_chunk, int backward_chunk) {
    F(forward_chunk, true);
    B(backward_chunk);
  };
  const bool last = p == pp - 1;
  const long long ahead = pp - p - 1;  // ranks after this one
  for (long long i = 0; i < 2 * ahead; ++i) F(0);  // 1. nF0
  for (int i = 0; i <= p; ++i) F(0), F(1);           // 2. nF0F1
  for (long long i = 0; i < ahead; ++i) B(1, true), W(), F(1);  // 3. nB1W1F1
  for (long long i = 0; i < m - 2LL * pp + p + 1; ++i) {        // 4. nF0B1F1B0
    // The last rank does not overlap its first pair (dualpipev.py: to
    // shorten the bubble).
    if (i == 0 && last) F(0), B(1);
    else FB(0, 1);
    FB(1, 0);
  }
  for (long long i = 0; i < ahead; ++i) B(1), FB(1, 0);  // 5. nB1F1B0
  const int half = (p + 1) / 2;                          // 6. nB1B0
  for (int i = 0; i <= p; ++i) {
    const bool defer_b1 = i > half || (i == half && p % 2 == 1);
    B(1, defer_b1);
    B(0, i >= half);
  }
  for (long long i = 0; i < ahead; ++i) W(), B(0, true);  // 7. nWB0
  while (!deferred.empty()) W();                          // 8. nW: p + 1 of them
  return out;
}

}  // namespace

const char* Name(PassKind kind) {
  switch (kind) {
    case PassKind::kForward: return "F";
    case PassKind::kBackward: return "B";
    case PassKind::kWeightGrad: return "W";
  }
  return "?";
}

int PipelineOrder::VirtualStage(int rank, int chunk) const {
  if (schedule == PipelineSchedule::kDualPipeV) return chunk == 0 ? rank : 2 * pp - 1 - rank;
  return chunk * pp + rank;
}

Result<PipelineOrder> BuildPipelineOrder(PipelineSchedule schedule, int pp, int vpp, long long microbatches) {
  const long long m = microbatches;
  if (pp < 1 || vpp < 1 || m < 1) return Needs(schedule, "pp, vpp and micro-batches of at least 1");
  switch (schedule) {
    case PipelineSchedule::kGPipe:
    case PipelineSchedule::k1F1B:
    case PipelineSchedule::kZeroBubbleH1:
      if (vpp != 1) return Needs(schedule, "vpp == 1 (one model chunk per rank), not vpp " + std::to_string(vpp));
      break;
    case PipelineSchedule::kInterleaved1F1B:
      if (vpp < 2) return Needs(schedule, "vpp > 1 (several model chunks per rank)");
      if (m % pp != 0) {
        return Needs(schedule, "micro-batches divisible by pp (" + std::to_string(m) + " over pp " +
                                   std::to_string(pp) + "), as Megatron's interleaved schedule does");
      }
      break;
    case PipelineSchedule::kDualPipeV:
      if (vpp != 2) return Needs(schedule, "vpp == 2 (two chunks per rank, the V), not vpp " + std::to_string(vpp));
      if (m < 2LL * pp) {
        return Needs(schedule, "at least 2 pp = " + std::to_string(2 * pp) + " micro-batches, not " +
                                   std::to_string(m));
      }
      break;
  }
  const bool split = schedule == PipelineSchedule::kZeroBubbleH1 || schedule == PipelineSchedule::kDualPipeV;
  const double passes = double(split ? 3 : 2) * double(m) * pp * vpp;
  if (passes > double(kMaxPipelinePasses)) {
    return Needs(schedule, "at most " + std::to_string(kMaxPipelinePasses) + " passes in its order; " +
                               std::to_string(m) + " micro-batches over pp " + std::to_string(pp) + " x vpp " +
                               std::to_string(vpp) + " are more");
  }
  PipelineOrder order;
  order.schedule = schedule;
  order.pp = pp;
  order.vpp = vpp;
  order.microbatches = m;
  order.split_backward = split;
  order.ranks.resize(static_cast<size_t>(pp));
  for (int p = 0; p < pp; ++p) {
    Passes& out = order.ranks[static_cast<size_t>(p)];
    switch (schedule) {
      case PipelineSchedule::kGPipe: out = GPipeRank(m); break;
      case PipelineSchedule::k1F1B: out = OneFOneBRank(pp, p, m, false, 0); break;
      case PipelineSchedule::kZeroBubbleH1: out = OneFOneBRank(pp, p, m, true, p); break;
      case PipelineSchedule::kInterleaved1F1B: out = InterleavedRank(pp, vpp, p, m); break;
      case PipelineSchedule::kDualPipeV: out = DualPipeVRank(pp, p, m); break;
    }
  }
  return order;
}

}  // namespace foldplan
