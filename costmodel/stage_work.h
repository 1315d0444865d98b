// The work of one training step, per pipeline rank and micro-batch, as the
// pipeline schedule (costmodel/schedule.h) and a step simulator consume it:
// the pipeline description (planner/pipeline.h: which virtual stage holds
// which blocks and runs on which rank), the compute seconds of each kind of
// block, and the layout's communication ops (costmodel/comm_plan.h) with
// their scope, calls, seconds per call and whether they may overlap.
//
// A block is a unit of work that repeats: a dense or MoE decoder layer, the
// embedding, the output layer and loss, an MTP module. Every block of one kind costs the
// same on every rank (the layout is uniform), so a rank's work is its block
// counts times the block costs, plus its stage-boundary traffic.
#pragma once

#include <array>
#include <vector>

#include "costmodel/block_kind.h"
#include "costmodel/comm_plan.h"
#include "costmodel/compute_time.h"
#include "costmodel/host_time.h"
#include "planner/pipeline.h"

namespace foldplan {


// Compute seconds of one block for one micro-batch on one rank.
struct BlockCost {
  double forward_s = 0;
  double backward_s = 0;   // the backward pass, without recomputation
  double recompute_s = 0;  // forward work the backward pass repeats
  // Of backward_s, the weight gradients (W), which zero-bubble schedules
  // run apart from the input gradients (B = backward_s - weight_grad_s).
  double weight_grad_s = 0;
  double total_s() const { return forward_s + backward_s + recompute_s; }
};

// The block costs of a decoder layer and of a part without recomputation
// (the embedding, the output layer and loss). A GEMM's backward is dgrad
// + wgrad at its forward's time each (compute_time.h), so a layer's W is
// the forward time of its GEMM parts (attention projections, MLP, router,
// routed and shared experts); the attention core has no weights, and the
// FP8 casts of output grads serve dgrad and wgrad alike, so they stay in B.
// A part's backward stays in B (W = 0): its OpTime does not separate the
// output layer's logits GEMM or the MTP projection from their norms and
// loss (a smaller W only lengthens a zero-bubble bubble), and the
// embedding's table-grad scatter is memory traffic, not a GEMM.
BlockCost LayerBlockCost(const LayerTimes& times);
BlockCost PartBlockCost(const OpTime& times);
// Of LayerBlockCost(times), the experts' share: what Megatron's combined
// 1F1B schedule (--overlap-moe-expert-parallel-comm) runs as a layer's
// "mlp" node between the dispatch and the combine. A dense layer's MLP
// (with its activation), or a MoE layer's routed and shared experts (with
// their activations and the gate), and those GEMMs' FP8 casts; the
// recomputation of those parts (LayerTimes::recompute_experts_s); W, their
// GEMMs' forward time. The rest of a layer (attention with its norms,
// rotary and projections, the router, permute, residual adds) is its
// attention node.
BlockCost ExpertsBlockCost(const LayerTimes& times);

// What one MTP module's block is made of: its projection (eh_proj with the
// next-token embedding and norms), one decoder layer of the model's last
// layer's kind (a MoE layer when `mtp_moe`) and the output head and loss.
// Its consumers sum the parts (the step per pass, the pipeline weights per
// part).
struct MtpBlockParts {
  BlockCost projection;
  BlockCost layer;
  BlockCost output;
};
MtpBlockParts MtpBlockPartsOf(const ComputeTimes& compute, bool mtp_moe);

// The block kinds an op of `scope` runs in every block of, as bits (bit i:
// BlockKind i): per layer, per dense layer, per MoE layer, the embedding or
// the output layer (an MTP module's layer is a MoE layer when `mtp_moe`);
// stage-boundary and per-step ops run in no block. One table for
// RunsInBlock and the schedule, which sums each op into every kind it runs
// in at once.
inline unsigned BlockKindsOf(CommOp::Scope scope, bool mtp_moe) {
  constexpr auto bit = [](BlockKind kind) { return 1u << static_cast<unsigned>(kind); };
  const unsigned mtp = bit(BlockKind::kMtpLayer);
  switch (scope) {
    case CommOp::kPerLayer: return bit(BlockKind::kDenseLayer) | bit(BlockKind::kMoeLayer) | mtp;
    case CommOp::kPerDenseLayer: return bit(BlockKind::kDenseLayer) | (mtp_moe ? 0u : mtp);
    case CommOp::kPerMoeLayer: return bit(BlockKind::kMoeLayer) | (mtp_moe ? mtp : 0u);
    case CommOp::kPerEmbedding: return bit(BlockKind::kEmbedding);
    case CommOp::kPerOutputLayer: return bit(BlockKind::kOutputLayer);
    case CommOp::kPerStageBoundary:
    case CommOp::kPerStep: return 0;
  }
  return 0;
}

// Whether `op` runs in every block of `kind` (BlockKindsOf).
// Inline: the simulator asks it per op and block.
inline bool RunsInBlock(const CommOp& op, BlockKind kind, bool mtp_moe) {
  return (BlockKindsOf(op.scope, mtp_moe) >> static_cast<unsigned>(kind) & 1u) != 0;
}

// One pipeline rank's work per micro-batch.
struct RankWork {
  int pipeline_rank = 0;
  std::array<int, kBlockKindCount> blocks{};  // blocks of each kind, indexed by BlockKind
  // Pipeline boundaries whose send/receive this rank pays per micro-batch
  // (each with the op's forward and backward calls): one per model chunk,
  // vpp, when pp > 1 (a micro-batch crosses pp x vpp - 1 boundaries).
  int boundary_crossings = 0;
  // Compute, summed over its blocks: the forward pass, the backward pass
  // with the recomputation it runs (recompute_s says how much of it that is).
  double forward_s = 0;
  double backward_s = 0;
  double recompute_s = 0;
  double weight_grad_s = 0;  // of backward_s, the weight gradients
  double compute_s() const { return forward_s + backward_s; }
  int count(BlockKind kind) const { return blocks[static_cast<size_t>(kind)]; }
};

struct StepWork {
  // The pipeline: its schedule and degrees (what the schedule reads), and
  // the description the work was built from, for a step simulator that
  // follows each virtual stage (not owned: it must outlive the work; null
  // in work assembled by hand).
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int pp = 1;
  int vpp = 1;
  const PipelineDescription* pipeline = nullptr;
  long long microbatches = 1;                     // m = global_batch / (dp x mbs), at least 1
  std::array<BlockCost, kBlockKindCount> block;   // indexed by BlockKind
  std::vector<CommOp> ops;                        // the layout's whole comm plan
  std::vector<RankWork> ranks;                    // pp
  // Of each block's cost, the part that grows with the rows routed to the
  // rank (the routed experts' GEMMs and activation), as costed: at the
  // busiest EP rank's load, `load_factor` x the mean (routing.h
  // ExpertLoadFactor). A simulator that draws each rank's load scales it.
  std::array<BlockCost, kBlockKindCount> routed;
  double load_factor = 1;
  // Of each block's cost, the shared experts' (their GEMMs, activation and
  // gate), which Megatron's --moe-shared-expert-overlap runs beside the
  // token dispatch.
  std::array<BlockCost, kBlockKindCount> shared;
  // Of each block's cost, its experts' share (ExpertsBlockCost; an MTP
  // module's: its layer's; 0 for the embedding and the output layer). The
  // rest is the block's attention side. EP overlap pairs each all-to-all
  // with one side of the other micro-batch's pass (schedule.h).
  std::array<BlockCost, kBlockKindCount> experts;
  // What the host does to launch each block's passes (host_time.h); all
  // zero in work assembled by hand. Set by CostModel::Work.
  HostWork host;
  bool mtp_moe = false;  // an MTP module's decoder layer is a MoE layer (the model's last layer is)
  int gpu_sms = 132;     // the GPU's SMs (GpuSpec::sms), for compute beside SM-using kernels
  // What one GPU's links carry, achieved (CommParams): its NVLink port per
  // direction, its share of its node's NICs and of its leaf's uplinks to
  // the spine; 0: links not shared (work assembled by hand). Set by
  // CostModel::Work.
  double nvlink_bytes_per_s = 0;
  double nic_bytes_per_s = 0;
  double spine_bytes_per_s = 0;  // its NIC share's share of the leaf's uplinks (spine oversubscription)

  const BlockCost& cost(BlockKind kind) const { return block[static_cast<size_t>(kind)]; }
  const BlockCost& routed_cost(BlockKind kind) const { return routed[static_cast<size_t>(kind)]; }
  const BlockCost& shared_cost(BlockKind kind) const { return shared[static_cast<size_t>(kind)]; }
  const BlockCost& experts_cost(BlockKind kind) const { return experts[static_cast<size_t>(kind)]; }
  bool Runs(const CommOp& op, BlockKind kind) const { return RunsInBlock(op, kind, mtp_moe); }
};

// Assembles the step's work from the pipeline (which the work points to:
// keep it alive while the work is used), the per-layer compute times
// (computed for `layout`) and the comm plan. `load_factor` is left 1: the
// caller that knows the job sets it (CostModel::Work).
StepWork BuildStepWork(const Layout& layout, const ModelSpec& model, const GpuSpec& gpu,
                       const PipelineDescription& pipeline, const ComputeTimes& compute, std::vector<CommOp> ops,
                       long long microbatches);
// The work points to the pipeline: a temporary one would dangle.
StepWork BuildStepWork(const Layout& layout, const ModelSpec& model, const GpuSpec& gpu,
                       const PipelineDescription&& pipeline, const ComputeTimes& compute, std::vector<CommOp> ops,
                       long long microbatches) = delete;
// The same with no ops, into *out, whose vectors keep their storage (a
// search builds one work after another without allocating).
void BuildStepWork(const Layout& layout, const ModelSpec& model, const GpuSpec& gpu,
                   const PipelineDescription& pipeline, const ComputeTimes& compute, long long microbatches,
                   StepWork* out);

// Block costs at or below those of each of several computes: per block
// kind, the least forward_s and the least backward_s over the ComputeTimes
// given to Include (recompute_s and weight_grad_s 0). The work built from
// them (BuildLeastStepWork) has every rank's forward_s and backward_s, so
// its compute_s, at or below those of BuildStepWork's work of any of those
// computes under any recompute set on the same pipeline, bit for bit: a
// rank's sums are of block counts >= 0 times costs >= 0 (SumRanks), and
// fl(a + b), fl(n x a) do not fall as a or b grows. What bounds a whole
// layout family's compute at once (schedule_bound.h LeastPipelineLowerBound).
struct LeastBlocks {
  // Indexed by BlockKind (two arrays, not BlockCosts: a search keeps
  // tens of thousands).
  std::array<double, kBlockKindCount> forward_s{};
  std::array<double, kBlockKindCount> backward_s{};
  bool empty = true;  // nothing included yet
  void Include(const ComputeTimes& compute, bool mtp_moe);
};

// BuildStepWork's work with `least`'s block costs (not empty) and no
// routed, shared or experts' shares.
void BuildLeastStepWork(const Layout& layout, const ModelSpec& model, const GpuSpec& gpu,
                        const PipelineDescription& pipeline, const LeastBlocks& least, long long microbatches,
                        StepWork* out);

}  // namespace foldplan
