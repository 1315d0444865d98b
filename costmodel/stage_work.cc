#include "costmodel/stage_work.h"

#include <algorithm>

namespace foldplan {

BlockCost LayerBlockCost(const LayerTimes& t) {
  const double wgrad_s = t.attention_projections.fwd_s + t.mlp.fwd_s + t.router.fwd_s + t.routed_experts.fwd_s +
                         t.shared_experts.fwd_s;
  return {t.fwd_s(), t.bwd_s(), t.recompute_s, wgrad_s};
}
BlockCost PartBlockCost(const OpTime& t) { return {t.fwd_s, t.bwd_s, 0, 0}; }

BlockCost ExpertsBlockCost(const LayerTimes& t) {
  BlockCost c;
  for (const OpTime* part : {&t.mlp, &t.mlp_activation, &t.routed_experts, &t.expert_activation, &t.shared_experts,
                             &t.shared_activation, &t.experts_fp8_casts}) {
    c.forward_s += part->fwd_s;
    c.backward_s += part->bwd_s;
  }
  c.recompute_s = t.recompute_experts_s;
  c.weight_grad_s = t.mlp.fwd_s + t.routed_experts.fwd_s + t.shared_experts.fwd_s;
  return c;
}

MtpBlockParts MtpBlockPartsOf(const ComputeTimes& compute, bool mtp_moe) {
  return {PartBlockCost(compute.mtp_projection), LayerBlockCost(mtp_moe ? compute.moe_layer : compute.dense_layer),
          PartBlockCost(compute.output_layer)};
}

const char* Name(BlockKind kind) {
  switch (kind) {
    case BlockKind::kDenseLayer: return "dense_layer";
    case BlockKind::kMoeLayer: return "moe_layer";
    case BlockKind::kEmbedding: return "embedding";
    case BlockKind::kOutputLayer: return "output_layer";
    case BlockKind::kMtpLayer: return "mtp_layer";
  }
  return "?";
}

StepWork BuildStepWork(const Layout& layout, const ModelSpec& model, const GpuSpec& gpu,
                       const PipelineDescription& pipeline, const ComputeTimes& compute, std::vector<CommOp> ops,
                       long long microbatches) {
  StepWork w;
  BuildStepWork(layout, model, gpu, pipeline, compute, microbatches, &w);
  w.ops = std::move(ops);
  return w;
}

namespace {

// Every field of *out set from the pipeline but the blocks' costs and the
// ranks' sums (SumRanks), the vectors' storage kept.
void StartWork(const ModelSpec& model, const GpuSpec& gpu, const PipelineDescription& pipeline,
               long long microbatches, StepWork* out) {
  std::vector<CommOp> ops = std::move(out->ops);
  std::vector<RankWork> ranks = std::move(out->ranks);
  ops.clear();
  ranks.clear();
  *out = StepWork{};
  StepWork& w = *out;
  w.ops = std::move(ops);
  w.ranks = std::move(ranks);
  w.schedule = pipeline.schedule;
  w.pp = pipeline.pp;
  w.vpp = pipeline.vpp;
  w.pipeline = &pipeline;
  w.gpu_sms = gpu.sms;
  w.microbatches = std::max<long long>(microbatches, 1);
  w.mtp_moe = model.mtp_layer_is_moe();
}

// Each rank's block counts and compute: its blocks' costs summed kind by
// kind (the backward pass runs the recomputation too). Every term is a
// count >= 0 times a cost >= 0, so no sum falls as a block's forward_s or
// backward_s + recompute_s grows (LeastBlocks relies on it).
void SumRanks(const Layout& layout, const PipelineDescription& pipeline, StepWork& w) {
  w.ranks.resize(pipeline.ranks.size());  // value-initialised: the sums below start at 0
  for (size_t p = 0; p < pipeline.ranks.size(); ++p) {
    const PipelineRank& held = pipeline.ranks[p];
    RankWork& r = w.ranks[p];
    if (p > 0 && held == pipeline.ranks[p - 1]) {  // the middle ranks often hold alike: the same sums
      r = w.ranks[p - 1];
      r.pipeline_rank = static_cast<int>(p);
      continue;
    }
    r.pipeline_rank = static_cast<int>(p);
    r.blocks[static_cast<size_t>(BlockKind::kDenseLayer)] = held.dense_layers();
    r.blocks[static_cast<size_t>(BlockKind::kMoeLayer)] = held.moe_layers;
    r.blocks[static_cast<size_t>(BlockKind::kEmbedding)] = held.embedding ? 1 : 0;
    r.blocks[static_cast<size_t>(BlockKind::kOutputLayer)] = held.loss ? 1 : 0;
    r.blocks[static_cast<size_t>(BlockKind::kMtpLayer)] = held.mtp_layers;
    r.boundary_crossings = layout.pp > 1 ? std::max(1, layout.vpp) : 0;
    for (BlockKind kind : kAllBlockKinds) {
      const BlockCost& c = w.cost(kind);
      const int n = r.count(kind);
      r.forward_s += n * c.forward_s;
      r.backward_s += n * (c.backward_s + c.recompute_s);
      r.recompute_s += n * c.recompute_s;
      r.weight_grad_s += n * c.weight_grad_s;
    }
  }
}

// The cost of each kind of block.
std::array<BlockCost, kBlockKindCount> BlockCostsOf(const ComputeTimes& compute, bool mtp_moe) {
  std::array<BlockCost, kBlockKindCount> block;
  block[static_cast<size_t>(BlockKind::kDenseLayer)] = LayerBlockCost(compute.dense_layer);
  block[static_cast<size_t>(BlockKind::kMoeLayer)] = LayerBlockCost(compute.moe_layer);
  block[static_cast<size_t>(BlockKind::kEmbedding)] = PartBlockCost(compute.embedding);
  block[static_cast<size_t>(BlockKind::kOutputLayer)] = PartBlockCost(compute.output_layer);
  // An MTP module: its projection, one decoder layer, the output head and
  // loss (only its layer recomputes or splits out weight gradients).
  const MtpBlockParts mtp = MtpBlockPartsOf(compute, mtp_moe);
  block[static_cast<size_t>(BlockKind::kMtpLayer)] = {
      mtp.projection.forward_s + mtp.layer.forward_s + mtp.output.forward_s,
      mtp.projection.backward_s + mtp.layer.backward_s + mtp.output.backward_s, mtp.layer.recompute_s,
      mtp.layer.weight_grad_s};
  return block;
}

}  // namespace

void BuildStepWork(const Layout& layout, const ModelSpec& model, const GpuSpec& gpu,
                   const PipelineDescription& pipeline, const ComputeTimes& compute, long long microbatches,
                   StepWork* out) {
  StartWork(model, gpu, pipeline, microbatches, out);
  StepWork& w = *out;
  w.block = BlockCostsOf(compute, w.mtp_moe);

  // The routed experts' share of a MoE layer (and of an MoE MTP module's):
  // their grouped GEMMs (W: their forward time, as LayerBlockCost counts it)
  // and activation.
  const LayerTimes& moe = compute.moe_layer;
  const BlockCost routed{moe.routed_experts.fwd_s + moe.expert_activation.fwd_s,
                         moe.routed_experts.bwd_s + moe.expert_activation.bwd_s, 0, moe.routed_experts.fwd_s};
  w.routed[static_cast<size_t>(BlockKind::kMoeLayer)] = routed;
  if (w.mtp_moe) w.routed[static_cast<size_t>(BlockKind::kMtpLayer)] = routed;
  const BlockCost shared{moe.shared_experts.fwd_s + moe.shared_activation.fwd_s,
                         moe.shared_experts.bwd_s + moe.shared_activation.bwd_s, 0, moe.shared_experts.fwd_s};
  w.shared[static_cast<size_t>(BlockKind::kMoeLayer)] = shared;
  if (w.mtp_moe) w.shared[static_cast<size_t>(BlockKind::kMtpLayer)] = shared;
  // The experts' side of each decoder layer (an MTP module's layer's).
  w.experts[static_cast<size_t>(BlockKind::kDenseLayer)] = ExpertsBlockCost(compute.dense_layer);
  w.experts[static_cast<size_t>(BlockKind::kMoeLayer)] = ExpertsBlockCost(moe);
  w.experts[static_cast<size_t>(BlockKind::kMtpLayer)] =
      w.experts[static_cast<size_t>(w.mtp_moe ? BlockKind::kMoeLayer : BlockKind::kDenseLayer)];

  SumRanks(layout, pipeline, w);
}

void LeastBlocks::Include(const ComputeTimes& compute, bool mtp_moe) {
  const std::array<BlockCost, kBlockKindCount> costs = BlockCostsOf(compute, mtp_moe);
  for (size_t k = 0; k < costs.size(); ++k) {
    forward_s[k] = empty ? costs[k].forward_s : std::min(forward_s[k], costs[k].forward_s);
    backward_s[k] = empty ? costs[k].backward_s : std::min(backward_s[k], costs[k].backward_s);
  }
  empty = false;
}

void BuildLeastStepWork(const Layout& layout, const ModelSpec& model, const GpuSpec& gpu,
                        const PipelineDescription& pipeline, const LeastBlocks& least, long long microbatches,
                        StepWork* out) {
  StartWork(model, gpu, pipeline, microbatches, out);
  for (size_t k = 0; k < out->block.size(); ++k) out->block[k] = {least.forward_s[k], least.backward_s[k], 0, 0};
  SumRanks(layout, pipeline, *out);
}

}  // namespace foldplan
