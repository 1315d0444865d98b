// Compute seconds per micro-batch (compute_time.h).
#include "costmodel/compute_time.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "costmodel/compute_profile.h"

namespace foldplan {
namespace {

double GemmSeconds(const GemmShape& g, Precision precision, const ComputeProfile& profile) {
  const double flops = g.flops();
  if (flops <= 0) return 0;
  return flops / profile.GemmFlopsPerS(g.m, g.n, g.k, precision);
}

double GroupedSeconds(const GroupedGemmShape& g, Precision precision,
                      const ComputeProfile& profile) {
  const double flops = g.flops();
  if (flops <= 0) return 0;
  return flops / profile.GroupedGemmFlopsPerS(g.experts, g.rows_per_expert, g.k, g.n, precision);
}

// Forward and backward of GEMMs: backward runs dgrad and wgrad, each with
// the forward's FLOPs, at the forward's rate.
OpTime Gemms(std::initializer_list<GemmShape> shapes, Precision precision,
             const ComputeProfile& profile) {
  OpTime t;
  for (const GemmShape& g : shapes) {
    t.fwd_flops += g.flops();
    t.fwd_s += GemmSeconds(g, precision, profile);
  }
  t.bwd_s = 2 * t.fwd_s;
  return t;
}

int AtLeastOne(double x) { return std::max(1, int(std::lround(x))); }

OpTime AttentionCore(const AttentionCoreShape& c, const ComputeProfile& profile) {
  OpTime t;
  t.fwd_flops = c.flops;
  if (c.flops <= 0) return t;
  // The kernel is batched over sequences and heads alike.
  const int heads = AtLeastOne(c.batch * c.heads);
  const int kv_heads = AtLeastOne(c.batch * c.kv_heads);
  t.fwd_s = c.flops / profile.AttentionFlopsPerS(c.seq, heads, kv_heads, c.qk_head_dim, false);
  const double fwd_bwd_s = kAttentionFwdBwdFlopsRatio * c.flops /
                           profile.AttentionFlopsPerS(c.seq, heads, kv_heads, c.qk_head_dim, true);
  t.bwd_s = std::max(0.0, fwd_bwd_s - t.fwd_s);
  return t;
}

LayerTimes TimeLayer(const LayerWork& w, Precision precision, Recompute recompute,
                     const ComputeProfile& profile) {
  LayerTimes t;
  // GQA/MHA: Megatron's linear_qkv is one GEMM of the three widths.
  const GemmShape qkv = {w.q.m, w.q.n + w.k.n + w.v.n, w.q.k};
  if (w.k.m > 0) {
    t.attention_projections = Gemms({qkv, w.o}, precision, profile);
  } else {
    t.attention_projections = Gemms({w.q, w.q_a, w.q_b, w.kv_a, w.kv_b, w.o}, precision, profile);
  }
  t.attention_core = AttentionCore(w.core, profile);
  t.mlp = Gemms({w.mlp_up, w.mlp_down}, precision, profile);
  t.router = Gemms({w.router}, Precision::kBF16, profile);
  t.routed_experts.fwd_flops = w.experts_up.flops() + w.experts_down.flops();
  t.routed_experts.fwd_s =
      GroupedSeconds(w.experts_up, precision, profile) + GroupedSeconds(w.experts_down, precision, profile);
  t.routed_experts.bwd_s = 2 * t.routed_experts.fwd_s;
  t.shared_experts = Gemms({w.shared_up, w.shared_down}, precision, profile);
  const OpTime gate = Gemms({w.shared_gate}, Precision::kBF16, profile);
  t.shared_experts.fwd_flops += gate.fwd_flops;
  t.shared_experts.fwd_s += gate.fwd_s;
  t.shared_experts.bwd_s += gate.bwd_s;

  if (recompute.full()) {
    t.recompute_s = t.fwd_s();
    t.recompute_flops = t.fwd_flops();
  } else if (recompute.has(RecomputeModule::kCoreAttn)) {
    t.recompute_s = t.attention_core.fwd_s;
    t.recompute_flops = t.attention_core.fwd_flops;
  }
  return t;
}

double CopySeconds(double bytes, const ComputeProfile& profile) {
  return bytes / (profile.copy_gb_per_s() * 1e9);
}

}  // namespace

ComputeTimes ComputeLayerTimes(const Layout& layout, const CostContext& ctx) {
  const ModelSpec& model = *ctx.model;
  const JobSpec& job = *ctx.job;
  const ComputeProfile& profile = *ctx.profile;
  ComputeTimes out;
  out.dense_layer = TimeLayer(LayerForwardWork(model, job, layout, false), layout.precision,
                              layout.recompute, profile);
  if (model.is_moe()) {
    out.moe_layer = TimeLayer(LayerForwardWork(model, job, layout, true), layout.precision,
                              layout.recompute, profile);
  }

  // Tokens whose embeddings and logits this rank handles: vocab-parallel
  // layers see the all-gathered mbs S / cp tokens, 1/tp of the vocabulary.
  const double tokens = double(layout.mbs) * job.seq_len / layout.cp;
  const double hidden = model.hidden;
  const double vocab_per_rank = double(model.vocab) / layout.tp;
  out.embedding.fwd_s = CopySeconds(kEmbeddingFwdBytesPerTokenHidden * tokens * hidden, profile);
  out.embedding.bwd_s = CopySeconds(kEmbeddingBwdBytesPerTokenHidden * tokens * hidden +
                                        kEmbeddingBwdBytesPerTableElement * vocab_per_rank * hidden,
                                    profile);

  // MTP projection: [mbs S / cp, 2H] x [2H, H / tp] per rank (a
  // column-parallel linear like the other TP-split GEMMs).
  if (model.mtp_layers > 0) {
    out.mtp_projection = Gemms({GemmShape{tokens, hidden / layout.tp, 2 * hidden}}, layout.precision, profile);
  }

  const GemmShape logits = OutputLayerWork(model, job, layout);
  out.output_layer = Gemms({logits}, Precision::kBF16, profile);
  const double logit_elements = logits.m * logits.n;
  out.output_layer.fwd_s += CopySeconds(kLossFwdBytesPerLogit * logit_elements, profile);
  out.output_layer.bwd_s += CopySeconds(kLossBwdBytesPerLogit * logit_elements, profile);
  return out;
}

double OptimizerStepSeconds(double params_per_rank, const ComputeProfile& profile) {
  return CopySeconds(kAdamBytesPerParam * params_per_rank, profile);
}

}  // namespace foldplan
