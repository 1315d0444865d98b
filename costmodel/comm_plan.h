// The inventory of a layout's communication: every collective one training
// step performs, with its group, bytes (nccl-tests convention, see
// collective.h), how often it runs and how long one call takes on the
// group's worst-case placement. Volumes: ../shared/reference/cost-model.md
// section 4; every formula is derived in doc/cost-model-comm.md.
//
// Precision: communication moves bf16 activations (2 bytes) even when the
// job's GEMMs run in fp8 (Megatron + Transformer Engine cast to fp8 inside
// the GEMM, after the all-gather / all-to-all; fp8 dispatch as in
// DeepSeek-V3 is an opt-in this model does not assume). Router
// probabilities travel in fp32 (4 bytes), gradients are reduced in fp32
// (Megatron's default for bf16 training), parameters all-gathered in bf16.
#pragma once

#include <vector>

#include "costmodel/collective.h"
#include "costmodel/cost_context.h"
#include "planner/group_placement.h"
#include "planner/layout.h"
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

struct CommOp {
  CommKind kind = CommKind::kTensorParallel;
  const char* name = "";        // "tp_attn_allgather", "moe_dispatch", ... (static)
  GroupKind group = GroupKind::kTp;
  Collective collective = Collective::kAllGather;
  double bytes = 0;             // per call, nccl-tests convention (collective.h)
  // What one count of calls_fwd / calls_bwd is per.
  enum Scope {
    kPerLayer,          // every decoder layer
    kPerDenseLayer,     // layers with a dense MLP
    kPerMoeLayer,       // layers with an MoE block
    kPerStageBoundary,  // each pipeline boundary a micro-batch crosses, each way
    kPerStep,           // once per optimizer step (data parallel)
  } scope = kPerLayer;
  // Calls per micro-batch per layer (or boundary) in the forward and the
  // backward pass; for kPerStep, calls per step (parameter all-gathers
  // counted as forward, gradient reductions as backward).
  double calls_fwd = 0;
  double calls_bwd = 0;
  double seconds_per_call = 0;  // CollectiveTime on the group's worst-case span
  const char* algorithm = "none";  // the algorithm CollectiveTime chose
  bool overlappable = false;    // may hide behind the compute of the block it runs in
  // EP overlap (--overlap-moe-expert-parallel-comm): in the 1F1B steady
  // state the op hides behind another micro-batch's compute (schedule.h).
  bool hides_behind_other_microbatch = false;
  // SMs its kernels occupy while it runs (the flex dispatcher's); compute
  // running beside it gets the GPU's other SMs.
  int sms = 0;

  // Seconds of one forward and one backward call set: per micro-batch and
  // layer (or boundary), or per step for kPerStep.
  double seconds_per_microbatch() const { return (calls_fwd + calls_bwd) * seconds_per_call; }
};

// The communication of `layout` for the model and job of `ctx`. Needs
// ctx.cluster, ctx.model and ctx.job; uses ctx.topology (built here when
// null: slow on large clusters) and ctx.comm (DefaultCommParams when null).
// Ops whose group has one rank are left out. The layout must be legal for
// the context (planner/legality.h); one PlaceGroups refuses gives an empty
// plan.
std::vector<CommOp> BuildCommPlan(const Layout& layout, const CostContext& ctx);
// The same with the group placement already computed (PlaceGroups).
std::vector<CommOp> BuildCommPlan(const Layout& layout, const CostContext& ctx,
                                  const LayoutPlacement& placement);

// Expected number of distinct EP ranks a token's top-k experts live on, for
// uniform routing over `experts` experts split evenly across `ep` ranks:
// ep x (1 - C(E - E/ep, k) / C(E, k)) (k distinct experts drawn without
// replacement); about ep x (1 - (1 - 1/ep)^k).
double ExpectedDistinctRanks(int experts, int top_k, int ep);

}  // namespace foldplan
