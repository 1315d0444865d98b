// One training step of a layout as a task graph (sim/task_graph.h), built
// from the cost model's work (costmodel/stage_work.h) and the schedule's
// order of passes (sim/pipeline_order.h). The fast path: one simulated rank
// per pipeline rank stands for every rank of its stage, which behave alike
// when loads are balanced, so a collective inside a stage (TP, CP, EP, DP)
// is a task of one member lasting the cost model's seconds for it. The
// whole path (StepGraphSpec::ranks): every rank, each collective a task of
// its group's ranks; every rank of a stage walks the same items, so with
// balanced loads the two paths give the same times.
//
// A pass (forward, backward or weight-gradient of one micro-batch on one
// model chunk) walks the chunk's blocks (embedding, decoder layers, MTP
// layers, output layer; backward in reverse). A block's compute is split
// into equal segments around its communication ops, each op in the order
// of the comm plan:
//   - an op that is not overlapped runs on the compute stream, between two
//     segments (its time is exposed);
//   - an overlapped op (TP comm overlap, ring-CP KV exchange, FSDP's
//     prefetched gathers) runs on its stream beside the whole block's
//     compute: the next block waits for both, so max(0, comm - compute) of
//     it is exposed, the cost model's "excess";
//   - with EP overlap, a forward paired with another micro-batch's backward
//     (1F1B's steady state, DualPipeV's pairs) runs each block with
//     EP-overlapped all-to-alls as four nodes (attention, dispatch,
//     experts, combine; backward: combine gradient, experts, dispatch
//     gradient beside the experts' deferred wgrad, attention), emitted in
//     turn with the other pass's, so that each all-to-all runs on the EP
//     stream beside one compute phase of the other pass, on the SMs the
//     dispatcher's kernels leave (the engine slows it).
// With shared-expert overlap, a MoE block's dispatch all-to-all runs on the
// EP stream while its shared experts compute; the routed experts wait for
// both.
// Pipeline sends follow each forward (to the next virtual stage) and
// backward (to the previous one) whose neighbour is on another rank: on the
// compute stream (1F1B: Megatron's blocking p2p) or on the PP stream beside
// the next pass (pp overlap; interleaved's overlap_p2p_comm). Data-parallel
// traffic: with dp overlap, parameter all-gathers bucketed one per block
// before the block's first forward, gradient reduce-scatters one per block
// after its last backward (Megatron's buckets; the last bucket exposed);
// without, one gather before the first pass and one reduction after the
// last, on the compute stream. Then each rank's optimizer step and the
// step's host syncs.
// The host (the work's HostWork, costmodel/host_time.h): each pass of a
// block has its host time, split evenly over the block's tasks on the
// compute stream; on the host stream, task i's share is its launch, which
// it waits for. A sync (a dropless dispatch reads its token counts) sits
// before the block's first EP all-to-all (after its first segment when it
// has none): the host waits for the GPU to reach it, then for the sync's
// round trip, before launching on. In a paired EP-overlap block not
// running ahead, the block's closing fence waits on the host stream, so
// the pair's two blocks take max(both launches, the pair's GPU time) and
// their syncs. Work assembled by hand has no host.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/status.h"
#include "costmodel/stage_work.h"
#include "inputs/model.h"
#include "planner/rank_map.h"
#include "sim/expert_loads.h"
#include "sim/pipeline_order.h"
#include "sim/task_graph.h"

namespace foldplan {

// Which communication runs beside compute (true) or blocks it (false). For
// tp, cp, dp and ep, unset means op by op as the comm plan marks it (its
// `overlappable` and `hides_behind_other_microbatch`); set, every op of the
// kind. sim/simulate.h says where each default comes from.
struct OverlapSet {
  std::optional<bool> tp;  // TP ops beside their block (TP comm overlap)
  std::optional<bool> cp;  // CP ops beside their block (ring attention's KV exchange)
  std::optional<bool> ep;  // EP all-to-alls of paired passes beside the other pass
  std::optional<bool> dp;  // bucketed gradient reductions and parameter gathers; FSDP's per-layer ops
  bool pp = false;         // pipeline sends on the PP stream
  bool shared = false;     // shared experts beside the token dispatch (--moe-shared-expert-overlap)
  // The host runs ahead of the GPU: it launches each block's tasks in
  // turn, a task starting no sooner than its launch, and waits at a sync
  // for the GPU to drain (true); false: it starts a block's launches when
  // the GPU starts the block, so that the block takes max(host, GPU) and
  // then its syncs, as the analytical model counts it.
  bool host = true;
};

struct StepGraphSpec {
  const StepWork* work = nullptr;     // its pipeline must be set
  const ModelSpec* model = nullptr;   // which layers are MoE
  const PipelineOrder* order = nullptr;
  OverlapSet overlap;
  std::vector<double> optimizer_s;    // per pipeline rank
  // The whole path: every rank of the layout is a simulated rank (its
  // global rank), its collectives tasks of their group's ranks, and with
  // `loads` each EP rank's routed rows drawn per MoE layer and micro-batch:
  // its routed experts' compute scales with its load over the costed one
  // (StepWork::load_factor), and a group's all-to-alls last the costed time
  // x its busiest member's load over the costed one (the all-to-all-v waits
  // for its slowest member). Null: the fast path.
  const RankMap* ranks = nullptr;
  const ExpertLoadDraw* loads = nullptr;  // null: balanced (needs `ranks`)
  // Concurrent communication on a rank shares its NVLink port and NIC
  // (StepWork's link rates; sim/engine.h): false, each op takes the cost
  // model's seconds whatever runs beside it.
  bool share_links = false;
  // Called after each pipeline stage is built with the share built.
  std::function<void(double)> progress;
};

// The tasks of one pass, for memory and reports.
struct PassRecord {
  int rank = 0;             // simulated rank (fast path: the pipeline rank)
  int pipeline_rank = 0;
  int chunk = 0;
  int virtual_stage = 0;
  int microbatch = 0;
  PassKind kind = PassKind::kForward;
  uint32_t first_task = 0;  // its first task in the graph
  uint32_t last_task = 0;   // its last compute or comm task (sends excluded)
};

// A pipeline send, for the trace's flow arrows: the send and the first task
// of the pass that waits for it.
struct SendRecord {
  uint32_t send = 0;
  uint32_t receiver = 0;
};

struct StepGraph {
  TaskGraph graph{1, 1};
  std::vector<PassRecord> passes;
  std::vector<SendRecord> sends;
  std::vector<uint32_t> optimizer;  // per rank: its optimizer task (the step's end there)
};

Result<StepGraph> BuildStepGraph(const StepGraphSpec& spec);

// Upper bounds on what BuildStepGraph adds for `spec` run over
// `microbatches` micro-batches with `lanes` simulated ranks per pipeline
// stage (1: the fast path; world / pp: the whole path), found without
// building it: each pass's items are made once per (chunk, kind, paired or
// not) and counted, the largest taken, times the passes the order holds
// (every rank runs each micro-batch's F and B of each chunk, and W when
// the schedule splits it; sim/pipeline_order.h). A member of a task counts
// once (`task_slots`: a collective of 64 ranks is 64), which bounds the
// tasks too; `edges` counts dependencies, stream order included. `spec`'s
// ranks and loads are not read; its order is read for its shape only
// (schedule, pp, vpp, split_backward), not its passes.
struct StepGraphBound {
  double task_slots = 0;
  double edges = 0;
  double passes = 0;  // PassRecords: one per pass and lane
};
Result<StepGraphBound> BoundStepGraph(const StepGraphSpec& spec, long long microbatches, long long lanes);

}  // namespace foldplan
