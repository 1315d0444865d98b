// Compute seconds per micro-batch on the busiest rank of a pipeline stage,
// by layer kind and part, with the FLOPs behind them (for MFU), plus the
// optimizer step. doc/cost-model-compute.md derives each term.
//
// Time of a GEMM part = its FLOPs / the measured rate for its shapes
// (ComputeProfile): GEMMs at (m, n, k); routed experts as one grouped GEMM
// with tokens_per_expert = rows / local experts; the attention core at the
// kernel's (seq, batch x heads, kv heads, head dim). Backward of a GEMM is
// 2 x its forward time (dgrad and wgrad, each as many FLOPs as the forward,
// at the forward's rate); backward of attention is the measured
// forward+backward time minus the forward time. Precision: the layout's for
// attention projections, MLPs and experts (Transformer Engine layers); bf16
// for the attention core, the router and the output layer (as Megatron runs
// them under --fp8). Every FP8 recipe runs its GEMMs on the profile's one
// measured FP8 curve (doc: "FP8 recipes").
//
// Memory-bound parts (norms, rotary, residual adds, activations, router
// scores, permute, FP8 casts, embedding, loss, optimizer) are bytes read +
// written / the profile's device-copy bandwidth; they have 0 FLOPs (MFU
// counts matmuls). Every byte count below is derived in the doc.
//
// The profile is used as given: the caller scales it to the cluster's GPU
// once (scaled = profile.ScaledTo(cluster.gpu); ctx.profile = &scaled)
// rather than every call copying tables (this runs for every layout of a
// search).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "costmodel/cost_context.h"
#include "costmodel/flops.h"
#include "inputs/model.h"
#include "planner/layout.h"

namespace foldplan {

class ComputeProfile;
class ComputeRateMemo;

// One part of the work on one rank, per micro-batch.
struct OpTime {
  double fwd_flops = 0;  // matmul FLOPs (flops.h counting); 0 for memory-bound parts
  double fwd_s = 0;
  double bwd_s = 0;
  double bwd_flops() const { return BackwardFlops(fwd_flops); }
};

// Sizes used below: T = mbs S / (cp tp) sequence-parallel rows,
// M = mbs S / cp rows of TP-split activations (width / tp), R = etp T K load
// routed rows on the busiest EP rank.
struct LayerTimes {
  // Matmul parts.
  OpTime attention_projections;  // q, k, v, o (fused QKV) or the MLA projections
  OpTime attention_core;
  OpTime mlp;             // dense layers
  OpTime router;          // MoE layers, from here down: the router GEMM
  OpTime routed_experts;  // busiest EP rank
  OpTime shared_experts;  // with the shared-expert gate
  // Memory-bound parts (0 FLOPs).
  OpTime norms;              // the two input RMSNorms, [T, H] each
  OpTime qk_norm;            // per-head q/k RMSNorm (qk_norm models); MLA's latent norms
  OpTime rotary;             // RoPE of q and k; MLA: the fused rope + q/k/v layout kernels
  OpTime residual_adds;      // the two residual adds; MoE layers: + the routed + shared sum
  OpTime mlp_activation;     // dense MLP SwiGLU / GELU on [M, F / tp]
  OpTime router_scores;      // score function, top-k, routing map, aux-loss scores on [T, E]
  OpTime permute;            // token permute / unpermute and the alltoall chunk sorts
  OpTime expert_activation;  // routed experts' SwiGLU / GELU on [R, F_e / etp] (moe_act)
  OpTime shared_activation;  // shared experts' SwiGLU / GELU and the gate multiply
  OpTime fp8_casts;          // FP8: quantize each FP8 linear's input (fwd), output grad (bwd)
  OpTime fp8_weight_casts;   // FP8: weight quantization, once per step / m micro-batches
  // Extra forward work during backward for the layout's Recompute set (the
  // union of the modules' forward parts; full: the layer's forward less the
  // weight casts, which stay cached).
  double recompute_s = 0;
  double recompute_flops = 0;
  // Shares of the parts above, not parts of their own (kLayerParts leaves
  // them out): of fp8_casts, the casts of the experts' GEMMs (the dense
  // MLP's, or the routed and shared experts'); of recompute_s, what
  // reruns of the experts' parts (the MLP, moe_act, shared_experts, or
  // the experts under moe and full). The experts' share of a layer
  // (stage_work.h ExpertsBlockCost) is what EP overlap pairs with the
  // other micro-batch's dispatch and its gradient (schedule.h).
  OpTime experts_fp8_casts;
  double recompute_experts_s = 0;

  double fwd_s() const;
  // Backward without recomputation; the backward pass costs bwd_s() + recompute_s.
  double bwd_s() const;
  double fwd_flops() const;
  double bwd_flops() const { return BackwardFlops(fwd_flops()); }
};

// Every part of LayerTimes with its name, for sums and reports.
struct LayerPart {
  const char* name;
  OpTime LayerTimes::*part;
};
inline constexpr LayerPart kLayerParts[] = {
    {"attention_projections", &LayerTimes::attention_projections},
    {"attention_core", &LayerTimes::attention_core},
    {"mlp", &LayerTimes::mlp},
    {"router", &LayerTimes::router},
    {"routed_experts", &LayerTimes::routed_experts},
    {"shared_experts", &LayerTimes::shared_experts},
    {"norms", &LayerTimes::norms},
    {"qk_norm", &LayerTimes::qk_norm},
    {"rotary", &LayerTimes::rotary},
    {"residual_adds", &LayerTimes::residual_adds},
    {"mlp_activation", &LayerTimes::mlp_activation},
    {"router_scores", &LayerTimes::router_scores},
    {"permute", &LayerTimes::permute},
    {"expert_activation", &LayerTimes::expert_activation},
    {"shared_activation", &LayerTimes::shared_activation},
    {"fp8_casts", &LayerTimes::fp8_casts},
    {"fp8_weight_casts", &LayerTimes::fp8_weight_casts},
};

inline double LayerTimes::fwd_s() const {
  double s = 0;
  for (const LayerPart& p : kLayerParts) s += (this->*p.part).fwd_s;
  return s;
}
inline double LayerTimes::bwd_s() const {
  double s = 0;
  for (const LayerPart& p : kLayerParts) s += (this->*p.part).bwd_s;
  return s;
}
inline double LayerTimes::fwd_flops() const {
  double s = 0;
  for (const LayerPart& p : kLayerParts) s += (this->*p.part).fwd_flops;
  return s;
}

struct ComputeTimes {
  LayerTimes dense_layer;  // a layer with the dense MLP
  LayerTimes moe_layer;    // a MoE layer; all zero for dense models
  OpTime embedding;        // first stage: table lookup, 0 FLOPs
  OpTime output_layer;     // last stage: final norm + output GEMM + cross-entropy loss
  // An MTP module (DeepSeek-V3's multi-token prediction) is, here, its
  // next-token embedding lookup, the two RMSNorms and the concat of
  // [hidden; embedding], the 2H -> H projection GEMM (with its FP8 casts),
  // then one decoder layer of the model's last layer's kind and the shared
  // output head and loss: the other parts above (stage_work.h adds them up).
  OpTime mtp_projection;

  const LayerTimes& layer(const ModelSpec& model, int i) const {
    return model.layer_is_moe(i) ? moe_layer : dense_layer;
  }
};

// Reads ctx.model, ctx.job and ctx.profile (already scaled, see above).
// No allocation.
ComputeTimes ComputeLayerTimes(const Layout& layout, const CostContext& ctx);

// One layer's forward work in the order ComputeLayerTimes counts it, each
// piece with the recompute modules that rerun it (any one of them; full
// reruns every piece). A layer's recompute_s and recompute_flops for any
// recompute set are the sums of its pieces in that order: the same
// additions as the direct computation, so the same bits.
struct LayerRecomputePieces {
  struct Piece {
    double fwd_s = 0, fwd_flops = 0;
    uint32_t modules = 0;  // bit m: RecomputeModule m reruns it
    bool experts = false;  // one of the experts' parts (LayerTimes::recompute_experts_s)
  };
  std::array<Piece, 24> pieces{};  // a layer has at most 20
  int count = 0;
  void Add(const OpTime& x, uint32_t modules, bool experts = false);
  // Sets times.recompute_s, recompute_flops and recompute_experts_s for `rc`.
  void Apply(Recompute rc, LayerTimes& times) const;
};

// ComputeLayerTimes that also records each layer's pieces (null: not), and
// looks rates up through `rate_memo` (null: the profile directly; the same
// bits either way).
ComputeTimes ComputeLayerTimes(const Layout& layout, const CostContext& ctx, LayerRecomputePieces* dense_pieces,
                               LayerRecomputePieces* moe_pieces, ComputeRateMemo* rate_memo = nullptr);

// ---- memory traffic per element (bytes read + written), bf16 = 2, fp32 = 4 ----
// Each is derived in doc/cost-model-compute.md ("Memory-bound passes").

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

// RMSNorm (TE), per element: forward reads x, writes y (2 + 2); backward
// reads dy and x, writes dx (2 + 2 + 2). The per-row fp32 rstd and the
// H-sized gamma and dgamma partials are negligible.
inline constexpr double kRmsNormFwdBytesPerElement = 4;
inline constexpr double kRmsNormBwdBytesPerElement = 6;
// Residual add (Megatron's bias-dropout-add, no bias, dropout 0): forward
// reads both inputs and writes the sum (2 + 2 + 2); backward, the residual
// stream's grad is accumulated from its two consumers (2 + 2 + 2).
inline constexpr double kResidualAddFwdBytesPerElement = 6;
inline constexpr double kResidualAddBwdBytesPerElement = 6;
// Fused RoPE (TE fused_apply_rotary_pos_emb), per element of q and k: read
// and write (2 + 2), forward and backward alike (the fp32 [S, d] frequency
// table is shared by every head and token: negligible).
inline constexpr double kRotaryBytesPerElement = 4;
// SwiGLU per element of its output [rows, F]: forward reads gate and up
// (2 x 2) and writes (2) = 6; backward reads dy (2) and the saved input
// (2 x 2), writes d(gate, up) (2 x 2) = 10. Megatron's weighted variant for
// routed experts also reads one fp32 prob per row (negligible).
inline constexpr double kSwigluFwdBytesPerElement = 6;
inline constexpr double kSwigluBwdBytesPerElement = 10;
// GELU per element: forward read + write (2 + 2); backward reads dy and x,
// writes dx (2 + 2 + 2).
inline constexpr double kGeluFwdBytesPerElement = 4;
inline constexpr double kGeluBwdBytesPerElement = 6;
// Shared-expert gate, per element of the shared output [T, H]: forward
// multiplies by sigmoid(gate), read + write (2 + 2); backward reads dy and
// the output (for the gate's grad) and writes dx (2 + 2 + 2).
inline constexpr double kGateMultiplyFwdBytesPerElement = 4;
inline constexpr double kGateMultiplyBwdBytesPerElement = 6;
// Router passes per element of the [T, E] fp32 logits (4 bytes; the
// recipes' fp32 router, and what TE's fused kernels compute in). Unfused
// (Megatron's eager topk_routing_with_score_function + aux loss), forward:
// score function (4 + 4), top-k read (4), dense probs by zeros + scatter
// (4 + 4 + 4), routing map by zeros, int, scatter, bool (4 + 8 + 8 + 5),
// aux-loss scores (4 + 4), their token sum (4) and the map's (1) = 62.
// Fused (TE fused_topk_with_score_function, fused_compute_score_for_moe_
// aux_loss, fused_moe_aux_loss): read logits, write probs, map and saved
// scores (4 + 4 + 1 + 4), read logits, write aux scores and map
// (4 + 4 + 1), aux loss reads scores and map (4 + 1) = 27.
inline constexpr double kRouterUnfusedFwdBytesPerScore = 62;
inline constexpr double kRouterFusedFwdBytesPerScore = 27;
// Backward. Both: the dense grad of the routing probs (4) and the sum of
// the two logits grads (4 + 4 + 4). Unfused: top-k backward zero-fill (4),
// score-function backward (4 + 4 + 4), aux path: expanded grad made
// contiguous (4) and its score backward (4 + 4 + 4) = 48. Fused: routing
// kernel backward (4 + 1 + 4 + 4), aux-loss grad written (4) and the aux
// score backward (4 + 4 + 4) = 45.
inline constexpr double kRouterUnfusedBwdBytesPerScore = 48;
inline constexpr double kRouterFusedBwdBytesPerScore = 45;
// MTP concat of [norm(hidden); norm(embedding)] per token x H: read both
// halves (2 + 2), write the [T, 2H] result (4). Its backward hands each norm
// a slice of the grad (a view, not counted).
inline constexpr double kMtpConcatFwdBytesPerTokenHidden = 8;

// Ring CP's per-step corrections (Transformer Engine's
// AttnFuncWithCPAndKVP2P, bf16): each step's kernel returns its partial
// output and softmax LSE, which are merged into the running result in fp32
// arithmetic (exp(lse_step - lse) scales the step's output). Bytes read +
// written, per element of the [rows, d_v] output or per query row (fp32
// LSE, 4 bytes); doc/cost-model-compute.md "Ring CP" derives the sums.
//  - first step's output as the running output (flash_attn_fwd_out_
//    correction_init): read the step's bf16 output, write bf16 (2 + 2);
//  - every later step (flash_attn_fwd_out_correction: out += out_step x
//    exp(lse_step - lse)): read the step's output and the running one,
//    write it back (2 + 2 + 2);
//  - per row of each of those: read the running and the step's LSE (4 + 4);
//  - LSE merge of each later step (flash_attn_fwd_softmax_lse_correction:
//    lse = max + log1p(exp(min - max))): read both, write one (4 + 4 + 4);
//  - the first step's LSE cloned as the running one: read + write (4 + 4).
inline constexpr double kRingOutInitBytesPerElement = 4;
inline constexpr double kRingOutCorrectionBytesPerElement = 6;
inline constexpr double kRingOutCorrectionBytesPerRow = 8;
inline constexpr double kRingLseCorrectionBytesPerRow = 12;
inline constexpr double kRingLseCopyBytesPerRow = 8;
// Backward: each step's dq (q rows x d_qk) and dK, dV (KV rows x (d_qk +
// d_v)) accumulated in bf16: the first step copies (read 2, write 2), every
// later one adds (read both, write: 2 + 2 + 2).
inline constexpr double kRingGradCopyBytesPerElement = 4;
inline constexpr double kRingGradAddBytesPerElement = 6;
struct RingCorrectionBytes {
  double fwd = 0, bwd = 0;
};
// The corrections of one layer's ring attention on the busiest rank, per
// micro-batch: forward L query rows every step (rank cp - 1's), backward
// the busier orientation of every off-diagonal step; zero without ring
// steps.
RingCorrectionBytes RingCorrectionBytesOf(const AttentionCoreShape& core);

// Token permute (row gather) and unpermute (sum of a token's copies) of
// bf16 rows. Permute from `in_rows` distinct source rows to `out_rows`
// copies: fused (TE moe_permute) reads each source row once and writes its
// copies, (in + out) x row; unfused (index_select) reads a source row per
// copy, 2 x out x row. Unpermute of `in_rows` copies into `out_rows` rows:
// fused (TE moe_unpermute) reads the copies and writes each row once,
// (in + out) x row; unfused zero-fills the output and scatter_add_s every
// copy (read the copy, read-modify-write its row), (out + 3 in) x row. The
// backward of each is the other with rows swapped.
double PermuteBytes(double in_rows, double out_rows, double row_bytes, bool fused);
double UnpermuteBytes(double in_rows, double out_rows, double row_bytes, bool fused);

// FP8 quantization bytes per element for a recipe (0 for bf16): reading
// bf16 (2) and writing the rowwise and the columnwise copy (1 + 1) that
// forward and dgrad/wgrad need (Hopper FP8 GEMMs are TN only, so the
// columnwise copy is the transpose; MXFP8 scales along the reduction dim,
// so Blackwell needs a second, columnwise-scaled quantization), plus:
//  - delayed: nothing (scale from the amax history, the current amax is
//    taken inside the cast kernel) = 4;
//  - tensorwise: an amax pass before the cast (read 2) = 6;
//  - blockwise: an fp32 scale per 128 elements of each copy (activations
//    and grads, 1x128 tiles: 2 x 4 / 128), per 128 x 128 block of weights
//    (2 x 4 / 16384);
//  - mxfp8: an E8M0 scale per 32 elements of each copy (2 x 1 / 32).
struct Fp8CastBytes {
  double activation_bytes_per_element = 0;  // inputs (forward) and output grads (backward)
  double weight_bytes_per_element = 0;      // weights, once per step
};
Fp8CastBytes Fp8CastBytesOf(Precision precision);


// Micro-batches per step, m = global_batch / (dp x mbs), at least 1: the
// one count the schedule (StepWork::microbatches), the memory model (the
// micro-batches in flight) and the FP8 weight casts' share use.
long long MicroBatchesPerStep(const JobSpec& job, const Layout& layout);

// Seconds of one optimizer step on a rank holding `params_per_rank` fp32
// master elements (its shard under the distributed optimizer): memory-bound,
// kAdamBytesPerParam x params / the profile's copy bandwidth.
double OptimizerStepSeconds(double params_per_rank, const ComputeProfile& profile);

}  // namespace foldplan
