// ComputeLayerTimes (compute_time.h) in its two stages, for its memo
// (compute_time_memo.h): what a layout's compute times share with every
// layout that differs from it only in ep, etp, the dispatcher, the recompute
// set and the micro-batches per step (ComputeShared), then the layout's own
// times from that (Assemble) and its FP8 weight casts (PutWeightCastsOf).
// ComputeLayerTimes is ComputeShared then Assemble: a memo that keeps the
// first and redoes the second returns the same bits. Internal to
// costmodel/compute_time*.cc.
#pragma once

#include <array>
#include <cstdint>

#include "costmodel/compute_profile.h"
#include "costmodel/compute_time.h"
#include "costmodel/cost_context.h"
#include "planner/layout.h"

namespace foldplan::compute_parts {

// The profile's rates, through the caller's memo when there is one (the
// memo returns the profile's rates bit for bit).
struct Rates {
  const ComputeProfile& profile;
  ComputeRateMemo* memo = nullptr;

  double Gemm(const GemmShape& g, Precision precision) const {
    return memo ? memo->GemmFlopsPerS(profile, g.m, g.n, g.k, precision)
                : profile.GemmFlopsPerS(g.m, g.n, g.k, precision);
  }
  double Grouped(const GroupedGemmShape& g, Precision precision) const {
    return memo ? memo->GroupedGemmFlopsPerS(profile, g.experts, g.rows_per_expert, g.k, g.n, precision)
                : profile.GroupedGemmFlopsPerS(g.experts, g.rows_per_expert, g.k, g.n, precision);
  }
  double Attention(AttentionBackend backend, const AttentionKernel& k, bool forward_and_backward) const {
    return memo ? memo->AttentionFlopsPerS(profile, backend, k, forward_and_backward)
                : profile.AttentionFlopsPerS(backend, k, forward_and_backward);
  }
};

inline void Add(OpTime& to, const OpTime& x) {
  to.fwd_flops += x.fwd_flops;
  to.fwd_s += x.fwd_s;
  to.bwd_s += x.bwd_s;
}

// A layer's times being summed: its parts, its forward pieces in order with
// the recompute modules that rerun each (a piece goes into its part and,
// when the layout's set covers it, into recompute_s: FinishLayer sums
// those from the pieces, as LayerRecomputePieces::Apply does for any set),
// and its FP8 weight elements on this rank.
struct LayerSum {
  LayerTimes t;
  LayerRecomputePieces pieces;
  double weights = 0;
  void Put(OpTime& part, const OpTime& x, uint32_t modules) {
    Add(part, x);
    pieces.Add(x, modules);
  }
  // One of the experts' parts (LayerTimes' shares); into fp8_casts (an FP8
  // cast of their GEMMs), also into that part's experts' share.
  void PutExperts(OpTime& part, const OpTime& x, uint32_t modules) {
    Add(part, x);
    if (&part == &t.fp8_casts) Add(t.experts_fp8_casts, x);
    pieces.Add(x, modules, true);
  }
};

// The MTP projection's parts in the order they are summed. Its weight
// cast, the one part that reads the micro-batches per step, is added
// between the head and the tail (MtpProjection), so that the rest is
// shared by every micro-batch count.
struct MtpParts {
  OpTime head;                 // the projection GEMM and its FP8 input and grad casts
  double weight_elements = 0;  // the GEMM's weights, cast once per step
  std::array<OpTime, 3> tail;  // the embedding lookup, the two norms, the concat
};

// What a layout's compute times share with every layout that differs from
// it only in ep, etp, the dispatcher, the recompute set and the
// micro-batches per step: the dense layer (but its recompute sums and its
// weight casts), a MoE layer's first half, the embedding, the output layer
// and the MTP projection's parts. Reads of `layout` tp, cp, mbs, cp_style
// and the precision (Shared's key).
struct SharedTimes {
  LayerSum dense;
  LayerSum moe_attention;
  OpTime embedding, output_layer;
  MtpParts mtp;
};

void ComputeShared(const Layout& layout, const CostContext& ctx, const Rates& rates, SharedTimes* out);

// The layout's times from what it shares: a MoE layer's second half, each
// layer's recompute sums for its set and the weight casts for its
// micro-batches per step. `moe_weights`, when given: the MoE layer's weight
// elements (for PutWeightCasts under another micro-batch count).
ComputeTimes Assemble(const SharedTimes& s, const Layout& layout, const CostContext& ctx, const Rates& rates,
                      LayerRecomputePieces* dense_pieces, LayerRecomputePieces* moe_pieces,
                      double* moe_weights = nullptr);

// The layout's FP8 weight casts into `out` (the one part of the times that
// reads the micro-batches per step), from the layers' weight elements and
// the MTP projection's parts.
void PutWeightCastsOf(const Layout& layout, const CostContext& ctx, double dense_weights, double moe_weights,
                      const MtpParts& mtp, ComputeTimes* out);

}  // namespace foldplan::compute_parts
