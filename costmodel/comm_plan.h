// The inventory of a layout's communication: every collective one training
// step performs, with its group, bytes (nccl-tests convention, see
// collective.h), how often it runs and how long one call takes on the
// group's worst-case placement. Volumes: ../shared/reference/cost-model.md
// section 4; every formula is derived in doc/cost-model-comm.md section 6.
//
// Precision: communication moves bf16 activations (2 bytes) even when the
// job's GEMMs run in fp8 (Megatron + Transformer Engine cast to fp8 inside
// the GEMM, after the all-gather / all-to-all), except the flex
// dispatcher's forward dispatch, which sends fp8 tokens with their scales
// under an fp8 recipe (DeepEP's fp8 dispatch; its combine stays bf16).
// Router probabilities travel in fp32 (4 bytes), gradients are reduced in
// fp32 (Megatron's default for bf16 training), parameters all-gathered in
// bf16.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "costmodel/collective.h"
#include "costmodel/cost_context.h"
#include "costmodel/routing.h"
#include "planner/group_placement.h"
#include "planner/layout.h"
#include "planner/layout_family.h"
#include "planner/pipeline.h"
#include "planner/rank_map.h"

namespace foldplan {

enum class CommKind {
  kTensorParallel,   // TP / sequence-parallel all-gathers and reduce-scatters
  kContextParallel,  // Ulysses all-to-alls, ring-attention KV exchange
  kExpertParallel,   // MoE token dispatch and combine (EP, ETP, TP x EP)
  kPipeline,         // stage-boundary activations and gradients
  kDataParallel,     // gradient reduce-scatter / all-reduce, parameter all-gather
};
const char* Name(CommKind kind);  // "tp", "cp", "ep", "pp", "dp"

// The block whose recomputation makes the backward pass repeat an op's
// forward calls: the whole layer (full recomputation only), core attention
// (where Transformer Engine's CP communicates), the dense MLP (`mlp`,
// dense layers only), the MoE layer (`moe`: router, dispatch, experts,
// combine and shared experts in one checkpoint), the shared experts
// (`shared_experts`, or inside `moe`).
enum class Rerun : uint8_t { kNever, kLayer, kCoreAttention, kDenseMlp, kMoe, kSharedExperts };
// The blocks `recompute` reruns, a bit per Rerun (kNever's never set).
unsigned RerunBlocks(const Recompute& recompute);

struct CommOp {
  CommKind kind = CommKind::kTensorParallel;
  const char* name = "";        // "tp_attn_allgather", "moe_dispatch", ... (static)
  GroupKind group = GroupKind::kTp;
  Collective collective = Collective::kAllGather;
  // Per call, nccl-tests convention (collective.h); a flex dispatcher op
  // (moe_flex_*) instead gives what the rank sends over both tiers, RDMA
  // plus NVLink forwarding (doc/cost-model-comm.md section 6).
  double bytes = 0;
  // Of `bytes`, the part through the rank's NIC: a flex op's RDMA share
  // (0 for every other op, whose split the collective model derives).
  double network_bytes = 0;
  // What one count of calls_fwd / calls_bwd is per.
  enum Scope {
    kPerLayer,          // every decoder layer
    kPerDenseLayer,     // layers with a dense MLP
    kPerMoeLayer,       // layers with an MoE block
    kPerStageBoundary,  // each pipeline boundary a micro-batch crosses, each way
    kPerStep,           // once per optimizer step (data parallel)
    kPerEmbedding,      // the input embedding's block (first stage; FSDP)
    kPerOutputLayer,    // the output layer's block (last stage; FSDP)
  } scope = kPerLayer;
  // Calls per micro-batch per layer (or boundary, or embedding / output
  // block) in the forward and the backward pass; for kPerStep, calls per
  // step (parameter all-gathers counted as forward, gradient reductions as
  // backward). FSDP's per-layer gathers and reduce-scatters run every
  // micro-batch, so they are per-layer ops, not kPerStep.
  double calls_fwd = 0;
  double calls_bwd = 0;
  // The forward calls the backward repeats when the layout's recompute set
  // reruns block `rerun`; calls_bwd counts them then (AddRecomputeCalls).
  Rerun rerun = Rerun::kNever;
  double rerun_calls = 0;
  // CollectiveTime (flex ops: ForwardedAllToAllTime) on the group's
  // worst-case span, and the algorithm it chose.
  double seconds_per_call = 0;
  const char* algorithm = "none";
  bool overlappable = false;    // may hide behind the compute of the block it runs in
  // EP overlap (--overlap-moe-expert-parallel-comm): in the 1F1B steady
  // state the op hides behind another micro-batch's compute (schedule.h).
  bool hides_behind_other_microbatch = false;
  // Which all-to-all of a MoE layer an EP op is, for EP overlap's phases
  // (schedule.h): false, the dispatch (forward: between the attention and
  // the experts; backward, its gradient: between the experts' backward and
  // the attention's); true, the combine (forward: after the experts;
  // backward, its gradient: before the experts' backward). The flex
  // dispatcher's backward ops are the one they are the gradient of.
  bool combine = false;
  // SMs its kernels occupy while it runs (the flex dispatcher's); compute
  // running beside it gets the GPU's other SMs.
  int sms = 0;
  // What one member sends per call through its NVLink port and its NIC
  // (collective.h RankTrafficOf; a flex op: its NVLink and RDMA bytes), for
  // a simulator that shares links between concurrent ops.
  RankTraffic traffic;

  // Seconds of one forward and one backward call set: per micro-batch and
  // layer (or boundary), or per step for kPerStep.
  double seconds_per_microbatch() const { return (calls_fwd + calls_bwd) * seconds_per_call; }
};

// The communication of `layout` for the model and job of `ctx`. Needs
// ctx.cluster, ctx.model and ctx.job; uses ctx.topology (built here when
// null: slow on large clusters) and ctx.comm (DefaultCommParams when null).
// Ops whose group has one rank are left out. The layout must be legal for
// the context (planner/legality.h); one PlaceGroups refuses gives an empty
// plan. What each pipeline rank holds (its data-parallel volume) comes
// from DescribePipeline(layout, model) with the default block weights.
std::vector<CommOp> BuildCommPlan(const Layout& layout, const CostContext& ctx);
// The same with the group placement already computed (PlaceGroups).
std::vector<CommOp> BuildCommPlan(const Layout& layout, const CostContext& ctx,
                                  const LayoutPlacement& placement);
// The same on the pipeline description the rest of the evaluation uses
// (CostModel's, built with its block weights: when the layers do not
// divide over the stages the weights choose the split).
std::vector<CommOp> BuildCommPlan(const Layout& layout, const CostContext& ctx,
                                  const LayoutPlacement& placement, const PipelineDescription& pipeline);

// The recipe variant whose plan takes no longer than `v`'s, per block kind
// and per stage crossing, on every placement (schedule_bound.h CommSecondsOf of
// its plan is at most v's, field by field): `v` without recomputation and
// without EP or TP overlap. Recomputation only adds forward calls the
// backward repeats (Volumes' again), and the overlaps only mark ops
// overlappable (tp_overlap) or hidden behind another micro-batch
// (MarkEpOverlap); none changes an op's group, collective or bytes, so each
// op of the floor's plan is in v's with as many calls or more, at the same
// seconds per call. FSDP, the dispatcher and the precision change which ops
// run and their bytes: they stay v's. What the search's step-time bound with
// communication reads (CostModel::ScoreFamily);
// tests/costmodel_score_cache_test.cc holds the claim to the builders below.
RecipeVariant CommFloorVariant(const RecipeVariant& v);

// `ops`, the plan of a layout without recomputation (BuildCommPlan), made
// the plan of the same layout under `recompute` on the same placement: each
// op's calls_bwd grows by its rerun_calls where `recompute` reruns its
// block. Recomputation changes nothing else of a plan (no op's group,
// collective, bytes or presence), so this equals BuildCommPlan of the
// layout with `recompute`, op by op and bit for bit (every count is a
// small whole number); tests/costmodel_comm_plan_test.cc holds it to that.
// What lets a search plan an arrangement once for all its recompute modes
// (CostModel::ScoreFamily).
void AddRecomputeCalls(const Recompute& recompute, std::vector<CommOp>* ops);
// Whether the recompute set that reruns `rerun_blocks` (RerunBlocks)
// repeats `op`'s forward calls: what AddRecomputeCalls adds them by.
inline bool RepeatsCalls(const CommOp& op, unsigned rerun_blocks) {
  return (rerun_blocks >> static_cast<unsigned>(op.rerun) & 1u) != 0;
}
// An op's seconds per micro-batch in the plan of the recompute set that
// reruns `rerun_blocks`, from the op of the plan without recomputation:
// bit for bit seconds_per_microbatch() of the op after AddRecomputeCalls
// of that set. What lets the schedule sum a plan without recomputation
// for any recompute set without copying it (schedule.h SumPlan).
inline double SecondsPerMicrobatch(const CommOp& op, unsigned rerun_blocks) {
  if (!RepeatsCalls(op, rerun_blocks)) return op.seconds_per_microbatch();
  return (op.calls_fwd + (op.calls_bwd + op.rerun_calls)) * op.seconds_per_call;
}

// Copies of one token a flex dispatcher (DeepEP, HybridEP) moves, for
// uniform top-k routing over the expert TP x EP group (etp x ep ranks,
// every ETP shard of a chosen expert receives the token) placed as `span`.
// n = etp x ep, N = span.domains NVLink domains:
//   gpus     = n x HitProbability(E, k, E/ep)        distinct destination GPUs
//   network  = (N - 1) x HitProbability(E, k, X(G'))  remote domains, one RDMA copy each
//   nvlink   = gpus x (G_max - 1) / G_max             NVLink copies per token a forwarder sends
// where X(G) = min(E, E/ep x max(1, G/etp)) experts sit in a domain of G
// group ranks, and G' = (n - G_min) / (N - 1) is the mean size of the
// domains other than the emptiest (whose ranks send the most over RDMA).
// One domain: network 0, nvlink = gpus x (n - 1) / n (a token whose expert
// is on its own GPU stays there).
struct FlexTokenCopies {
  double gpus = 0;
  double domains = 0;  // distinct destination domains, own included
  double network = 0;
  double nvlink = 0;
};
FlexTokenCopies ExpectedFlexCopies(int experts, int top_k, int ep, int etp, const GroupSpan& span);

class CollectiveTimeMemo;  // costmodel/collective_time_memo.h

// The same, timings looked up in `memo` first (which must hold timings of
// this placement's groups and ctx's parameters only); identical results.
std::vector<CommOp> BuildCommPlan(const Layout& layout, const CostContext& ctx,
                                  const LayoutPlacement& placement, const PipelineDescription& pipeline,
                                  CollectiveTimeMemo* memo);
// The same into *ops (replaced; its storage kept, for a search that plans
// one layout after another without allocating).
void BuildCommPlan(const Layout& layout, const CostContext& ctx, const LayoutPlacement& placement,
                   const PipelineDescription& pipeline, CollectiveTimeMemo* memo, std::vector<CommOp>* ops);

// BuildCommPlan in steps, for a search that plans many layouts on one
// placement (CostModel shares each step's ops among the layouts of a
// search run placed alike that differ only in what the step does not
// read). BuildLayerCommOps: the plan's ops that read no pipeline
// description, in plan order, without recomputation (every op but the
// data-parallel ones), into *ops (replaced); it reads of the layout only
// LayerCommKeyOf's fields (the placement gives the rest: group sizes and
// spans), so layouts with equal keys placed alike get the same ops.
// AddStepCommOps: the data-parallel ops appended, which carry the largest
// pipeline rank's parameters (none under FSDP, whose ops are per layer);
// it reads of the layout only tp, ep, etp and fsdp, and of the pipeline
// only its ranks. Those two, then AddRecomputeCalls(layout.recompute,
// ops), make *ops the BuildCommPlan of the same arguments, bit for bit
// (tests/costmodel_comm_plan_test.cc). Both need ctx.cluster, ctx.model
// and ctx.job (else BuildLayerCommOps empties *ops and AddStepCommOps adds
// nothing).
struct LayerCommKey {
  int pp = 1, tp = 1, cp = 1, ep = 1, etp = 1, mbs = 1;
  CpStyle cp_style = CpStyle::kUlysses;
  Dispatcher dispatcher = Dispatcher::kAllToAll;
  bool a2a_overlap = false;
  Precision precision = Precision::kBF16;
  bool fsdp = false;
  bool tp_overlap = false;
  bool operator==(const LayerCommKey&) const = default;
};
LayerCommKey LayerCommKeyOf(const Layout& layout);
void BuildLayerCommOps(const Layout& layout, const CostContext& ctx, const LayoutPlacement& placement,
                       CollectiveTimeMemo* memo, std::vector<CommOp>* ops);
void AddStepCommOps(const Layout& layout, const CostContext& ctx, const LayoutPlacement& placement,
                    const PipelineDescription& pipeline, CollectiveTimeMemo* memo, std::vector<CommOp>* ops);

}  // namespace foldplan
