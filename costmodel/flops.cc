// Per-rank GEMM shapes and FLOPs of one layer (flops.h; derivations in
// doc/cost-model-compute.md). Everything is in double: shapes are exact
// integers well below 2^53, and per-rank shares may be fractional for
// layouts that legality would reject anyway.
#include "costmodel/flops.h"

#include <algorithm>

#include "costmodel/routing.h"

namespace foldplan {
namespace {

// Widths of the gated (GLU) up projection: gate and up side by side.
double UpWidth(const ModelSpec& model, double ffn) {
  return model.activation == Activation::kSwiGLU ? 2 * ffn : ffn;
}

void FillGqaProjections(const ModelSpec& m, double tokens, double tp, LayerWork& w) {
  const double q_width = double(m.heads) * m.head_dim;
  const double kv_width = double(m.kv_heads) * m.head_dim;
  const double v_width = double(m.kv_heads) * m.v_head_dim();
  // Column-parallel q, k, v; row-parallel o (input split over tp).
  w.q = {tokens, q_width / tp, double(m.hidden)};
  w.k = {tokens, kv_width / tp, double(m.hidden)};
  w.v = {tokens, v_width / tp, double(m.hidden)};
  w.o = {tokens, double(m.hidden), double(m.heads) * m.v_head_dim() / tp};
}

// MLA. The LoRA down projections (q_a, kv_a) are not split over TP in
// Megatron: each rank runs them at full width on its sequence-parallel
// shard of tokens_sp / tp rows, then gathers. Per-rank FLOPs are the same
// either way (total / (tp cp)); the shape matters for the rate lookup.
void FillMlaProjections(const ModelSpec& m, double tokens, double tp, LayerWork& w) {
  const MlaSpec& a = *m.mla;
  const double heads = m.heads;
  const double hidden = m.hidden;
  const double qk_dim = double(a.qk_nope_head_dim) + a.qk_rope_head_dim;
  const double shard = tokens / tp;
  if (a.q_lora_rank > 0) {
    w.q_a = {shard, double(a.q_lora_rank), hidden};
    w.q_b = {tokens, heads * qk_dim / tp, double(a.q_lora_rank)};
  } else {
    w.q = {tokens, heads * qk_dim / tp, hidden};
  }
  w.kv_a = {shard, double(a.kv_lora_rank) + a.qk_rope_head_dim, hidden};
  w.kv_b = {tokens, heads * (double(a.qk_nope_head_dim) + a.v_head_dim) / tp,
            double(a.kv_lora_rank)};
  w.o = {tokens, hidden, heads * a.v_head_dim / tp};
}

AttentionCoreShape CoreShape(const ModelSpec& m, const JobSpec& job, const Layout& l) {
  AttentionCoreShape c;
  const double seq = job.seq_len;
  c.batch = l.mbs;
  c.qk_head_dim = m.head_dim;
  c.v_head_dim = m.v_head_dim();
  const double causal_per_head = seq * seq * (double(c.qk_head_dim) + c.v_head_dim);
  if (l.cp_style == CpStyle::kUlysses || l.cp == 1) {
    // Ulysses: after the all-to-all each rank holds the full sequence for
    // heads / (tp cp) heads.
    c.heads = double(m.heads) / (l.tp * l.cp);
    c.kv_heads = std::max(1.0, double(m.kv_heads) / (l.tp * l.cp));
    c.seq = seq;
    c.flops = c.batch * c.heads * causal_per_head;
  } else {
    // Ring: each rank keeps heads / tp heads and its S / cp queries, and
    // meets every key block in turn; with the usual load balancing (chunks
    // i and 2cp-1-i per rank) each rank does 1/cp of the causal work.
    c.heads = double(m.heads) / l.tp;
    c.kv_heads = std::max(1.0, double(m.kv_heads) / l.tp);
    c.seq = seq / l.cp;
    c.flops = c.batch * c.heads * causal_per_head / l.cp;
    // Transformer Engine's ring (AttnFuncWithCPAndKVP2P) calls a kernel per
    // step: causal on the local block, then each other rank's KV block
    // against half of it (compute_time.cc prices each).
    c.ring_steps = l.cp;
  }
  return c;
}

}  // namespace

LayerWork LayerForwardWork(const ModelSpec& model, const JobSpec& job, const Layout& layout,
                           bool moe_layer) {
  LayerWork w;
  w.moe = moe_layer && model.is_moe();
  const double tp = layout.tp;
  const double hidden = model.hidden;
  // Rows of every TP-split GEMM: the all-gathered sequence shard.
  const double tokens = double(layout.mbs) * job.seq_len / layout.cp;
  const double tokens_per_rank = tokens / tp;  // T

  if (model.attention == AttentionKind::kMLA && model.mla) {
    FillMlaProjections(model, tokens, tp, w);
  } else {
    FillGqaProjections(model, tokens, tp, w);
  }
  w.core = CoreShape(model, job, layout);

  if (!w.moe) {
    if (model.ffn_hidden > 0) {
      w.mlp_up = {tokens, UpWidth(model, model.ffn_hidden) / tp, hidden};
      w.mlp_down = {tokens, hidden, model.ffn_hidden / tp};
    }
    return w;
  }

  const MoeSpec& e = *model.moe;
  w.router = {tokens_per_rank, double(e.experts), hidden};
  // Each EP rank receives on average T K rows from its EP group; the ETP
  // all-gather makes that etp T K rows on 1/etp of the expert width. The
  // busiest rank has ExpertLoadFactor times the mean.
  const int local_experts = std::max(1, e.experts / std::max(1, layout.ep));
  const double rows =
      double(layout.etp) * tokens_per_rank * e.top_k * ExpertLoadFactor(job, layout.ep);
  const double rows_per_expert = rows / local_experts;
  const double etp = layout.etp;
  w.experts_up = {local_experts, rows_per_expert, UpWidth(model, e.ffn_hidden) / etp, hidden};
  w.experts_down = {local_experts, rows_per_expert, hidden, e.ffn_hidden / etp};

  // Megatron fuses several shared experts into one MLP of their summed width.
  const double shared = double(e.shared_experts) * e.shared_ffn_hidden;
  if (shared > 0) {
    w.shared_up = {tokens, UpWidth(model, shared) / tp, hidden};
    w.shared_down = {tokens, hidden, shared / tp};
    if (e.shared_expert_gate) w.shared_gate = {tokens_per_rank, 1, hidden};
  }
  return w;
}

LayerFlops FlopsOf(const LayerWork& w) {
  LayerFlops f;
  f.q_proj_flops = w.q.flops();
  f.q_a_flops = w.q_a.flops();
  f.q_b_flops = w.q_b.flops();
  f.k_proj_flops = w.k.flops();
  f.v_proj_flops = w.v.flops();
  f.kv_a_flops = w.kv_a.flops();
  f.kv_b_flops = w.kv_b.flops();
  f.o_proj_flops = w.o.flops();
  f.attention_core_flops = w.core.flops;
  f.mlp_flops = w.mlp_up.flops() + w.mlp_down.flops();
  f.router_flops = w.router.flops();
  f.routed_experts_flops = w.experts_up.flops() + w.experts_down.flops();
  f.shared_experts_flops = w.shared_up.flops() + w.shared_down.flops() + w.shared_gate.flops();
  return f;
}

LayerFlops LayerForwardFlops(const ModelSpec& model, const JobSpec& job, const Layout& layout,
                             bool moe_layer) {
  return FlopsOf(LayerForwardWork(model, job, layout, moe_layer));
}

GemmShape OutputLayerWork(const ModelSpec& model, const JobSpec& job, const Layout& layout) {
  const double tokens = double(layout.mbs) * job.seq_len / layout.cp;
  return {tokens, double(model.vocab) / layout.tp, double(model.hidden)};
}

double RecomputeFlops(const LayerFlops& forward, Recompute recompute) {
  if (recompute.full()) return forward.total_flops();
  const bool moe = recompute.has(RecomputeModule::kMoe);
  double flops = 0;
  if (recompute.has(RecomputeModule::kCoreAttn)) flops += forward.attention_core_flops;
  if (recompute.has(RecomputeModule::kMlaUpProj)) flops += forward.q_b_flops + forward.kv_b_flops;
  if (recompute.has(RecomputeModule::kMlp)) flops += forward.mlp_flops;
  if (moe) flops += forward.router_flops + forward.routed_experts_flops;
  // Shared experts run inside the MoE module: counted once under either.
  if (moe || recompute.has(RecomputeModule::kSharedExperts)) flops += forward.shared_experts_flops;
  return flops;
}

double ModelFlopsPerToken(const ModelSpec& model, int seq_len) {
  // One sequence on one rank with no parallelism and perfect balance: the
  // forward FLOPs are 2 x N_matmul x S + the causal attention term, so
  // 3 x forward / S is the per-token training figure stated in flops.h.
  JobSpec job;
  job.seq_len = seq_len;
  job.routing_imbalance = 1;
  job.capacity_factor = 0;
  const Layout one;  // every degree 1, mbs 1
  const int moe_layers = model.moe_layer_count();
  const int dense_layers = model.layers - moe_layers;
  double forward = OutputLayerWork(model, job, one).flops();
  forward += dense_layers * LayerForwardFlops(model, job, one, false).total_flops();
  if (moe_layers > 0) {
    forward += moe_layers * LayerForwardFlops(model, job, one, true).total_flops();
  }
  return 3 * forward / seq_len;
}

double ModelFlopsPerTokenFullAttention(const ModelSpec& model, int seq_len) {
  // The causal core is half the full S x S work: add it once more, per
  // decoder layer (training = 3 x forward, per token = / S).
  JobSpec job;
  job.seq_len = seq_len;
  const Layout one;
  const double causal_core = LayerForwardFlops(model, job, one, false).attention_core_flops;
  return ModelFlopsPerToken(model, seq_len) + 3 * model.layers * causal_core / seq_len;
}

}  // namespace foldplan
