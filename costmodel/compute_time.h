// Compute seconds per micro-batch on the busiest rank of a pipeline stage,
// by layer kind and part, with the FLOPs behind them (for MFU), plus the
// optimizer step. doc/cost-model-compute.md derives each term.
//
// Time of a part = its FLOPs / the measured rate for its shapes
// (ComputeProfile): GEMMs at (m, n, k); routed experts as one grouped GEMM
// with tokens_per_expert = rows / local experts; the attention core at the
// kernel's (seq, batch x heads, kv heads, head dim). Backward of a GEMM is
// 2 x its forward time (dgrad and wgrad, each as many FLOPs as the forward,
// at the forward's rate); backward of attention is the measured
// forward+backward time minus the forward time. Precision: the job's for
// attention projections, MLPs and experts (Transformer Engine layers); bf16
// for the attention core, the router and the output layer (as Megatron runs
// them under --fp8). Memory-bound parts (embedding, loss, optimizer) are
// bytes / the profile's device-copy bandwidth (bytes read + written).
//
// The profile is used as given: the caller scales it to the cluster's GPU
// once (scaled = profile.ScaledTo(cluster.gpu); ctx.profile = &scaled)
// rather than every call copying tables (this runs for every layout of a
// search).
#pragma once

#include "costmodel/cost_context.h"
#include "costmodel/flops.h"
#include "inputs/model.h"
#include "planner/layout.h"

namespace foldplan {

class ComputeProfile;

// One part of the work on one rank, per micro-batch.
struct OpTime {
  double fwd_flops = 0;  // matmul FLOPs (flops.h counting); 0 for memory-bound parts
  double fwd_s = 0;
  double bwd_s = 0;
  double bwd_flops() const { return BackwardFlops(fwd_flops); }
};

struct LayerTimes {
  OpTime attention_projections;  // q, k, v, o (fused QKV) or the MLA projections
  OpTime attention_core;
  OpTime mlp;             // dense layers
  OpTime router;          // MoE layers, from here down
  OpTime routed_experts;  // busiest EP rank
  OpTime shared_experts;  // with the shared-expert gate
  // Extra forward work during backward for the layout's recompute option
  // (full: the layer's forward; selective: the attention core's forward).
  double recompute_s = 0;
  double recompute_flops = 0;

  double fwd_s() const {
    return attention_projections.fwd_s + attention_core.fwd_s + mlp.fwd_s + router.fwd_s +
           routed_experts.fwd_s + shared_experts.fwd_s;
  }
  // Backward without recomputation; the backward pass costs bwd_s() + recompute_s.
  double bwd_s() const {
    return attention_projections.bwd_s + attention_core.bwd_s + mlp.bwd_s + router.bwd_s +
           routed_experts.bwd_s + shared_experts.bwd_s;
  }
  double fwd_flops() const {
    return attention_projections.fwd_flops + attention_core.fwd_flops + mlp.fwd_flops +
           router.fwd_flops + routed_experts.fwd_flops + shared_experts.fwd_flops;
  }
  double bwd_flops() const { return BackwardFlops(fwd_flops()); }
};

struct ComputeTimes {
  LayerTimes dense_layer;  // a layer with the dense MLP
  LayerTimes moe_layer;    // a MoE layer; all zero for dense models
  OpTime embedding;        // first stage: table lookup, 0 FLOPs
  OpTime output_layer;     // last stage: output GEMM + cross-entropy loss
  // An MTP module (DeepSeek-V3's multi-token prediction) is its projection
  // of [hidden; next-token embedding] (2H -> H) here, then one decoder layer
  // of the model's last layer's kind and the shared output head and loss:
  // the other parts above (stage_work.h adds them up).
  OpTime mtp_projection;

  const LayerTimes& layer(const ModelSpec& model, int i) const {
    return model.layer_is_moe(i) ? moe_layer : dense_layer;
  }
};

// Reads ctx.model, ctx.job and ctx.profile (already scaled, see above).
// No allocation.
ComputeTimes ComputeLayerTimes(const Layout& layout, const CostContext& ctx);

// Memory traffic per element (bytes read + written) of the memory-bound
// parts; each is derived in doc/cost-model-compute.md.
// Embedding forward: read a bf16 row, write the bf16 output, per token x H.
inline constexpr double kEmbeddingFwdBytesPerTokenHidden = 4;
// Embedding backward per token x H: read the output grad (2), read and
// write the table-grad row (2 + 2) in the index-add.
inline constexpr double kEmbeddingBwdBytesPerTokenHidden = 6;
// Embedding backward per table element (V/tp x H): zero the dense bf16
// grad (2), then the hook adds it into the fp32 main grad (read 2, read 4,
// write 4).
inline constexpr double kEmbeddingBwdBytesPerTableElement = 12;
// Megatron's vocab-parallel cross-entropy, per logit element (M x V/tp):
// forward casts bf16 to fp32 (2 + 4), max (4), subtract max (4 + 4),
// exp (4 + 4), sum (4), divide (4 + 4) = 38; backward scales the saved
// softmax by the incoming grad (4 + 4) and casts to bf16 (4 + 2) = 14.
inline constexpr double kLossFwdBytesPerLogit = 38;
inline constexpr double kLossBwdBytesPerLogit = 14;
// Adam step per fp32 master parameter element held by the rank: fused Adam
// reads grad, param, m, v (16) and writes param, m, v (12); copying the
// master to the bf16 model weight reads 4 and writes 2; the grad-norm for
// clipping reads the grad again (4). 16 + 12 + 6 + 4 = 38.
inline constexpr double kAdamBytesPerParam = 38;

// Seconds of one optimizer step on a rank holding `params_per_rank` fp32
// master elements (its shard under the distributed optimizer): memory-bound,
// kAdamBytesPerParam x params / the profile's copy bandwidth.
double OptimizerStepSeconds(double params_per_rank, const ComputeProfile& profile);

}  // namespace foldplan
