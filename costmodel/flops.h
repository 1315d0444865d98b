// Matmul FLOPs of one transformer layer on one rank for one micro-batch,
// split into named parts, and the GEMM shapes behind them (the compute-time
// model looks up a measured rate for each shape). doc/cost-model-compute.md
// derives every formula.
//
// Conventions:
//  - A GEMM [m, k] x [k, n] is 2 m n k FLOPs. Only matmuls count: norms,
//    activations, softmax, rotary, residual adds and the embedding lookup
//    are 0 FLOPs here (their time, where it matters, is modelled as memory
//    traffic in compute_time.h).
//  - Attention is causal and only the work under the mask counts: half of
//    the S x S score matrix. Per head and sequence, QK^T + PV forward is
//    2 S^2 (d_qk + d_v) / 2 = S^2 (d_qk + d_v).
//  - Backward = 2 x forward (dgrad + wgrad of every matmul; for attention,
//    dQ, dK, dV and dP). Recomputation adds the forward matmuls of the
//    recomputed modules (RecomputeFlops below).
//  - Tokens: T = mbs S / (cp tp) per rank enter a layer (sequence parallel).
//    TP-split projections and MLPs run on the all-gathered mbs S / cp tokens
//    with 1/tp of the weight, so their per-rank FLOPs are total / (tp cp).
//  - Routed experts: the busiest EP rank, whose time sets the layer's time,
//    does 6 T K H F x load FLOPs (GLU; 4 T K H F for GELU), independent of
//    ETP, where load = ExpertLoadFactor (routing.h): capacity_factor when
//    one is set (every expert padded to capacity), else routing_imbalance
//    (busiest expert / mean) when ep > 1, else 1 (one rank holds every
//    expert and receives exactly its own T K rows).
#pragma once

#include "inputs/job.h"
#include "inputs/model.h"
#include "planner/layout.h"

namespace foldplan {

// One GEMM as one rank runs it: [m, k] x [k, n].
struct GemmShape {
  double m = 0;  // rows: tokens
  double n = 0;  // output width
  double k = 0;  // reduction width
  double flops() const { return 2 * m * n * k; }
};

// A grouped GEMM: `experts` GEMMs of rows_per_expert x k x n (Megatron's
// GroupedMLP over the rank's local experts).
struct GroupedGemmShape {
  int experts = 0;
  double rows_per_expert = 0;
  double n = 0;
  double k = 0;
  double flops() const { return 2 * experts * rows_per_expert * n * k; }
};

// The attention core (QK^T, softmax, PV) as one rank's kernel runs it.
struct AttentionCoreShape {
  double batch = 0;     // sequences (mbs)
  double heads = 0;     // query heads on this rank
  double kv_heads = 0;  // KV heads on this rank (at least 1: replicated below that)
  double seq = 0;       // sequence length of one kernel call (S; S/cp for ring CP)
  int qk_head_dim = 0;
  int v_head_dim = 0;
  double flops = 0;     // causal forward FLOPs on this rank
  // Ring CP (cp > 1): the kernel calls per layer and direction, cp of them
  // (one causal over the rank's seq-long block, cp - 1 non-causal of
  // seq x seq/2 or seq/2 x seq, each flops / cp); 0 otherwise (one causal
  // call over seq).
  int ring_steps = 0;
};

// Forward work of one layer on one rank, per micro-batch. Shapes a model
// does not have are all zero (m = 0 or experts = 0).
struct LayerWork {
  bool moe = false;
  // Attention projections. GQA/MHA: q, k, v, o. MLA: q (no query LoRA) or
  // q_a then q_b; kv_a (latent + shared rope key), kv_b (latent to every
  // head's nope key and value); o.
  GemmShape q, q_a, q_b, k, v, kv_a, kv_b, o;
  AttentionCoreShape core;
  GemmShape mlp_up, mlp_down;  // dense MLP; up is gate + up for GLU
  GemmShape router;            // MoE: hidden -> experts scores
  GroupedGemmShape experts_up, experts_down;
  GemmShape shared_up, shared_down;  // shared experts, TP-split like the dense MLP
  GemmShape shared_gate;             // hidden -> 1 sigmoid gate, when the model has one
};

// Forward FLOPs of one layer on one rank, per micro-batch, by part.
struct LayerFlops {
  double q_proj_flops = 0;  // GQA/MHA q, or MLA q without a query LoRA
  double q_a_flops = 0;     // MLA query LoRA down
  double q_b_flops = 0;     // MLA query LoRA up
  double k_proj_flops = 0;  // GQA/MHA
  double v_proj_flops = 0;  // GQA/MHA
  double kv_a_flops = 0;    // MLA
  double kv_b_flops = 0;    // MLA
  double o_proj_flops = 0;
  double attention_core_flops = 0;
  double mlp_flops = 0;
  double router_flops = 0;
  double routed_experts_flops = 0;
  double shared_experts_flops = 0;  // shared experts and their gate

  double attention_projection_flops() const {
    return q_proj_flops + q_a_flops + q_b_flops + k_proj_flops + v_proj_flops + kv_a_flops +
           kv_b_flops + o_proj_flops;
  }
  double total_flops() const {
    return attention_projection_flops() + attention_core_flops + mlp_flops + router_flops +
           routed_experts_flops + shared_experts_flops;
  }
};


// The GEMM shapes of layer work for `layout` (degrees, mbs, cp_style); a
// MoE layer when `moe_layer`, else a dense layer. Uses job.seq_len,
// routing_imbalance and capacity_factor. No allocation.
LayerWork LayerForwardWork(const ModelSpec& model, const JobSpec& job, const Layout& layout,
                           bool moe_layer);
LayerFlops FlopsOf(const LayerWork& work);
LayerFlops LayerForwardFlops(const ModelSpec& model, const JobSpec& job, const Layout& layout,
                             bool moe_layer);

// The embedding is a table lookup: no matmul FLOPs.
inline constexpr double kEmbeddingForwardFlops = 0;
// Output layer on the last stage: [mbs S / cp, H] x [H, V / tp] per rank
// (vocab-parallel), 2 (mbs S / cp) H V / tp forward FLOPs; the loss itself
// is not a matmul (its time is memory traffic).
GemmShape OutputLayerWork(const ModelSpec& model, const JobSpec& job, const Layout& layout);

inline double BackwardFlops(double forward_flops) { return 2 * forward_flops; }
// Extra forward FLOPs run during backward: the matmuls of the union of the
// recomputed modules, each counted once. full: the whole layer's forward;
// core_attn: the attention core; mla_up_proj: MLA's q_b and kv_b; mlp: the
// dense MLP; moe: router + routed experts + shared experts (and gate);
// shared_experts: the shared experts (and gate); moe_act and layernorm
// recompute memory-bound passes only (0 FLOPs); none: 0.
double RecomputeFlops(const LayerFlops& forward, Recompute recompute);

// Model FLOPs per token for MFU: training (forward + backward, no
// recomputation, no imbalance), the Megatron/PaLM convention with causal
// attention counted under the mask only:
//   ModelFlopsPerToken = 6 N_matmul + 3 L S a (d_qk + d_v)
// N_matmul = the matmul parameters one token touches: attention projections,
// the dense MLP or the router + top_k routed + shared experts (+ gate), and
// the output layer (V x H, counted even when tied to the input embedding).
// Excluded: the input embedding (a lookup), norms, biases, MTP modules.
// Attention: forward per token and layer is 2 FLOPs x S/2 keys on average x
// a (d_qk + d_v); training is 3 x that. For MHA (a d = H) it is 6 L S H,
// half of PaLM's non-causal 12 L S H. L counts every decoder layer.
double ModelFlopsPerToken(const ModelSpec& model, int seq_len);
// The same with attention counted over the full S x S score matrix (no
// causal halving), the convention of Megatron's num_floating_point_operations
// before core v0.12 (and PaLM's 12 L S H for MHA):
//   6 N_matmul + 6 L S a (d_qk + d_v).
// Reported MFU under it is higher for the same run; compare like with like.
double ModelFlopsPerTokenFullAttention(const ModelSpec& model, int seq_len);

}  // namespace foldplan
