// The order of pipeline work on each pipeline rank under a schedule: for
// every rank, the list of passes (forward F, backward B, weight gradient W
// of one micro-batch on one model chunk) its one compute stream runs, in
// order. The step simulator replays it; doc/cost-model.md ("Step time")
// derives each schedule's bubble and memory from it.
//
// Contract: every rank's list holds, for every micro-batch and chunk,
// exactly one F and one B, and one W when split_backward. With s the
// virtual stage (VirtualStage) of a pass, a replay must enforce:
//  - F(mb, s) after F(mb, s - 1);
//  - B(mb, s) after F(mb, s) and after B(mb, s + 1) (the last stage's B
//    only after its own F);
//  - W(mb, s) after B(mb, s) (always on the same rank);
//  - each rank runs its list in order, one pass at a time, except that a
//    pass marked paired_with_next runs overlapped with the next one.
// Every order built here is free of deadlock under these rules
// (tests/sim_pipeline_order_test.cc replays each one).
//
// The orders (m micro-batches, rank p of pp):
//  - gpipe: F(0 .. m-1), then B(0 .. m-1). Backwards run in forward order,
//    as torch.distributed.pipelining's ScheduleGPipe runs them (the GPipe
//    paper draws them reversed; on uniform stages the step is the same,
//    and forward order frees the oldest activations first).
//  - 1f1b: Megatron's non-interleaved schedule: w = min(pp - p - 1, m)
//    warm-up forwards, m - w steady pairs F(w + i), B(i), then w
//    cool-down backwards.
//  - interleaved-1f1b: Megatron's forward_backward_pipelining_with_
//    interleaving: the k-th forward is chunk (k / pp) % vpp of micro-batch
//    (k / (pp vpp)) pp + k % pp, the k-th backward the same with the chunk
//    reversed (vpp - 1 - chunk); min(2 (pp - p - 1) + (vpp - 1) pp, m vpp)
//    warm-up forwards, then one forward and one backward at a time, then
//    the remaining backwards. Needs m % pp == 0, as Megatron's schedule
//    without microbatch groups does (with these warm-ups a short last
//    group of micro-batches can deadlock: pp 4, vpp 3, m 5 does).
//  - zb-h1: ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR
//    2024): 1F1B's forwards and input-gradient backwards B, with each
//    weight gradient W deferred: rank p runs W's only while more than p of
//    its B's have no W yet (after every B it catches up to B's done - p),
//    and the p left after its last B at the end. The first rank's W
//    follows its B; the later a rank, the more W's fill its cool-down,
//    where it would wait for the next backward. Every rank holds at most
//    min(pp, m) micro-batches whose W is pending: 1F1B's peak (rank 0).
//  - dualpipev: DeepSeek's DualPipeV (the DualPipe repository's
//    dualpipev.py; torchtitan's DualPipeV), two chunks per rank in a V:
//    virtual stage c runs on rank c < pp ? c : 2 pp - 1 - c, chunk 0 the
//    down leg, chunk 1 the up leg. Eight steps, F0 meaning a forward of
//    chunk 0 etc., each chunk's passes in micro-batch order:
//      1. nF0       2 (pp - p - 1) x F0
//      2. nF0F1     (p + 1) x [F0, F1]
//      3. nB1W1F1   (pp - p - 1) x [B1 (W deferred), W (oldest), F1]
//      4. nF0B1F1B0 (m - 2 pp + p + 1) x [F0&B1, F1&B0] (& = an overlapped
//                   pair); the last rank runs its first F0 and B1 apart
//      5. nB1F1B0   (pp - p - 1) x [B1, F1&B0]
//      6. nB1B0     (p + 1) x [B1, B0], W deferred from the middle one
//                   (i = (p + 1) / 2: from its B1 on odd ranks, its B0 on
//                   even ones)
//      7. nWB0      (pp - p - 1) x [W (oldest), B0 (W deferred)]
//      8. nW        (p + 1) x W (oldest)
//    A backward whose W is not deferred is a whole backward: its W follows
//    its B at once (in a pair: F, B, then W; the pair's backward is whole).
//    Needs vpp == 2 and m >= 2 pp.
#pragma once

#include <vector>

#include "core/status.h"
#include "inputs/pipeline_schedule.h"

namespace foldplan {

// kBackward is the whole backward unless the schedule splits W out.
enum class PassKind { kForward, kBackward, kWeightGrad };
const char* Name(PassKind kind);  // "F", "B", "W"

struct PipelinePass {
  PassKind kind = PassKind::kForward;
  int microbatch = 0;  // 0 .. m-1
  int chunk = 0;       // model chunk on this rank, 0 .. vpp-1 (DualPipeV: 0 down leg, 1 up leg)
  // DualPipeV (and EP overlap): this pass and the next one in the list are an overlapped
  // forward-backward pair of two micro-batches (their compute and communication may interleave).
  bool paired_with_next = false;
};

struct PipelineOrder {
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int pp = 1, vpp = 1;
  long long microbatches = 1;
  bool split_backward = false;  // B and W are separate passes (zb-h1, dualpipev)
  std::vector<std::vector<PipelinePass>> ranks;  // pp lists, each in execution order
  // The virtual stage (model order, 0 .. pp*vpp-1) that `chunk` on `rank` is.
  int VirtualStage(int rank, int chunk) const;
};

// The order holds 3 x m x pp x vpp passes at most, 16 bytes each; real
// steps hold about 10^5 (m ~ 10^3, pp x vpp ~ 10^2). Past this (1 GiB) the
// order is refused rather than built.
inline constexpr long long kMaxPipelinePasses = 1LL << 26;

// Error (naming the schedule and what it needs) when the schedule cannot
// run with these degrees: pp, vpp and m below 1; gpipe, 1f1b and zb-h1
// need vpp == 1; interleaved-1f1b vpp > 1 and m % pp == 0; dualpipev
// vpp == 2 and m >= 2 pp; or more passes than kMaxPipelinePasses.
Result<PipelineOrder> BuildPipelineOrder(PipelineSchedule schedule, int pp, int vpp, long long microbatches);

}  // namespace foldplan
