// A layout's communication, op by op (cost-model.md section 4; the
// derivations are in doc/cost-model-comm.md).
#include "costmodel/comm_plan.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "costmodel/comm_params.h"
#include "planner/pipeline.h"
#include "topology/topology.h"

namespace foldplan {

const char* Name(CommKind kind) {
  switch (kind) {
    case CommKind::kTensorParallel: return "tp";
    case CommKind::kContextParallel: return "cp";
    case CommKind::kExpertParallel: return "ep";
    case CommKind::kPipeline: return "pp";
    case CommKind::kDataParallel: return "dp";
  }
  return "?";
}

double ExpectedDistinctRanks(int experts, int top_k, int ep) {
  if (ep <= 1 || experts < 1 || top_k < 1) return ep >= 1 ? 1 : 0;
  // P(a given rank holds none of the k experts) = C(E - E/ep, k) / C(E, k)
  // = prod_{i<k} (E - E/ep - i) / (E - i).
  const double per_rank = static_cast<double>(experts) / ep;
  double none = 1;
  for (int i = 0; i < top_k; ++i) none *= std::max(0.0, (experts - per_rank - i) / (experts - i));
  return ep * (1 - none);
}

namespace {

constexpr double kActivationBytes = 2;  // bf16 (see the header on fp8)
constexpr double kProbBytes = 4;        // fp32 router probabilities
constexpr double kGradBytes = 4;        // fp32 gradient buffers
constexpr double kParamBytes = 2;       // bf16 parameters
constexpr double kCountBytes = 8;       // int64 token counts

// ---------------------------------------------------------------------------
// Parameters per layer, for the data-parallel volumes. The same counting as
// inputs/model.cc (which keeps its helpers private): weight matrices, norms,
// router, QKV biases.

double MlpParams(const ModelSpec& m, double width) {
  const double matrices = m.activation == Activation::kSwiGLU ? 3 : 2;
  return matrices * m.hidden * width;
}

double AttentionParams(const ModelSpec& m) {
  double params = 0;
  if (m.attention == AttentionKind::kMLA && m.mla) {
    const MlaSpec& a = *m.mla;
    const double qk = double(a.qk_nope_head_dim) + a.qk_rope_head_dim;
    const double q = a.q_lora_rank > 0
                         ? double(m.hidden) * a.q_lora_rank + a.q_lora_rank + double(a.q_lora_rank) * m.heads * qk
                         : double(m.hidden) * m.heads * qk;
    const double kv = double(m.hidden) * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank +
                      double(a.kv_lora_rank) * m.heads * (a.qk_nope_head_dim + a.v_head_dim);
    params = q + kv + double(m.heads) * a.v_head_dim * m.hidden;
  } else {
    const double q = double(m.heads) * m.head_dim;
    const double kv = double(m.kv_heads) * m.head_dim;
    params = double(m.hidden) * (q + 2 * kv) + q * m.hidden;
    if (m.qkv_bias) params += q + 2 * kv;
  }
  if (m.qk_norm) params += 2.0 * m.head_dim;
  return params;
}

// Parameters of one layer reduced over DP x CP (everything but routed experts).
double DenseLayerParams(const ModelSpec& m, bool moe_layer) {
  double params = AttentionParams(m) + 2.0 * m.hidden;  // + two norms
  if (!moe_layer) return params + MlpParams(m, m.ffn_hidden);
  const MoeSpec& e = *m.moe;
  params += double(m.hidden) * e.experts;  // router
  params += e.shared_experts * MlpParams(m, e.shared_ffn_hidden);
  if (e.shared_expert_gate) params += m.hidden;
  return params;
}

// Routed-expert parameters of one MoE layer (reduced over EDP).
double ExpertLayerParams(const ModelSpec& m) { return m.moe->experts * MlpParams(m, m.moe->ffn_hidden); }

struct DataParallelParams {
  double dense = 0;   // reduced over DP x CP, whole stage (before the TP split)
  double expert = 0;  // reduced over EDP, whole stage (before the EP x ETP split)
};

// The largest dense and expert parameter counts of any pipeline stage (the
// stage whose data-parallel reduction is slowest bounds the step).
DataParallelParams LargestStage(const Layout& l, const ModelSpec& m) {
  const PipelineDescription pipeline = DescribePipeline(l, m);
  std::vector<DataParallelParams> stages(pipeline.ranks.size());
  for (const VirtualStage& v : pipeline.stages) {
    DataParallelParams& s = stages[static_cast<size_t>(v.pipeline_rank)];
    for (int layer = v.first_layer; layer < v.first_layer + v.layers; ++layer) {
      const bool moe = m.layer_is_moe(layer);
      s.dense += DenseLayerParams(m, moe);
      if (moe) s.expert += ExpertLayerParams(m);
    }
  }
  const double table = double(m.vocab) * m.hidden;
  for (size_t p = 0; p < stages.size(); ++p) {
    const PipelineRank& held = pipeline.ranks[p];
    if (held.embedding) {
      stages[p].dense += table;  // input embedding (vocab-parallel)
      if (m.learned_positions) stages[p].dense += double(m.max_positions) * m.hidden;
    }
    if (held.loss) {
      // The output layer; a tied one is still a copy on the last stage when pp > 1.
      if (!m.tied_embeddings || l.pp > 1) stages[p].dense += table;
      stages[p].dense += m.hidden;  // final norm
    }
  }
  DataParallelParams largest;
  for (const DataParallelParams& s : stages) {
    largest.dense = std::max(largest.dense, s.dense);
    largest.expert = std::max(largest.expert, s.expert);
  }
  return largest;
}

// ---------------------------------------------------------------------------

// Appends ops, timing each on its group's worst-case span; skips ops that
// move nothing (a one-rank group, zero bytes, no calls).
class PlanBuilder {
 public:
  PlanBuilder(const LayoutPlacement& placement, const CommParams& params, std::vector<CommOp>& out)
      : placement_(placement), params_(params), out_(out) {}

  void Add(CommKind kind, const char* name, GroupKind group, Collective collective, double bytes,
           CommOp::Scope scope, double calls_fwd, double calls_bwd, bool overlappable) {
    const GroupPlacement& g = placement_.of(group);
    if (g.size < 2 || !(bytes > 0) || calls_fwd + calls_bwd <= 0) return;
    const CollectiveCost cost = CollectiveTime(collective, bytes, g.span, params_, g.groups_sharing_links);
    CommOp op;
    op.kind = kind;
    op.name = name;
    op.group = group;
    op.collective = collective;
    op.bytes = bytes;
    op.scope = scope;
    op.calls_fwd = calls_fwd;
    op.calls_bwd = calls_bwd;
    op.seconds_per_call = cost.seconds;
    op.algorithm = cost.algorithm;
    op.overlappable = overlappable;
    out_.push_back(op);
  }

 private:
  const LayoutPlacement& placement_;
  const CommParams& params_;
  std::vector<CommOp>& out_;
};

// Sizes shared by the op builders below.
struct Volumes {
  Volumes(const Layout& l, const ModelSpec& m, const JobSpec& j)
      : layout(l), model(m), job(j),
        tokens_cp(double(l.mbs) * j.seq_len / l.cp),
        tokens(tokens_cp / l.tp),
        hidden(m.hidden) {}
  const Layout& layout;
  const ModelSpec& model;
  const JobSpec& job;
  double tokens_cp;  // mbs x S / CP: a CP rank's tokens (the TP group's, gathered)
  double tokens;     // T = mbs x S / (CP x TP): a rank's tokens under SP
  double hidden;
  // Extra forward calls the backward pass repeats: full recomputation
  // reruns the whole layer; selective reruns the core attention, where CP
  // communicates (Transformer Engine's CP lives inside core attention).
  double recompute_layer() const { return layout.recompute.full() ? 1 : 0; }
  double recompute_attention() const { return layout.recompute.has(RecomputeModule::kCoreAttn) ? 1 : 0; }
};

// TP with sequence parallelism, per block (attention; dense MLP; shared
// experts), on [mbs x S/CP, H]: forward all-gather before the column-
// parallel GEMM and reduce-scatter after the row-parallel one; backward
// all-gathers the output gradient (row-parallel), reduce-scatters the input
// gradient (column-parallel), and re-gathers the input that SP did not keep
// for the weight gradient (overlapped with the data-gradient GEMM).
void AddTensorParallel(const Volumes& v, PlanBuilder& plan) {
  const double bytes = v.tokens_cp * v.hidden * kActivationBytes;
  const double again = v.recompute_layer();
  struct Block {
    CommOp::Scope scope;
    const char* allgather;
    const char* reducescatter;
    const char* regather;
    bool present;
  };
  const ModelSpec& m = v.model;
  const bool dense_layers = m.layers > m.moe_layer_count();
  const bool shared_experts = m.is_moe() && m.moe->shared_experts > 0;
  const Block blocks[] = {
      {CommOp::kPerLayer, "tp_attn_allgather", "tp_attn_reducescatter", "tp_attn_regather", true},
      {CommOp::kPerDenseLayer, "tp_mlp_allgather", "tp_mlp_reducescatter", "tp_mlp_regather", dense_layers},
      {CommOp::kPerMoeLayer, "tp_shared_allgather", "tp_shared_reducescatter", "tp_shared_regather",
       shared_experts},
  };
  for (const Block& b : blocks) {
    if (!b.present) continue;
    plan.Add(CommKind::kTensorParallel, b.allgather, GroupKind::kTp, Collective::kAllGather, bytes, b.scope, 1,
             1 + again, false);
    plan.Add(CommKind::kTensorParallel, b.reducescatter, GroupKind::kTp, Collective::kReduceScatter, bytes,
             b.scope, 1, 1 + again, false);
    plan.Add(CommKind::kTensorParallel, b.regather, GroupKind::kTp, Collective::kAllGather, bytes, b.scope, 0,
             1, true);
  }
}

// Ulysses: all-to-alls over CP of q, k, v (sequence-sharded -> head-
// sharded) and of the output back. Send buffer per rank = its mbs x S/CP
// tokens x its heads (a/TP, or a_kv/TP) x head dim x 2 bytes; in total
// b (mbs S/C) d (2a + 2a_kv) / TP when the q/k and v head dims agree. KV
// heads replicated to one per CP rank when a_kv/TP < CP and the job allows
// it. Backward: the same four on the gradients.
void AddUlysses(const Volumes& v, PlanBuilder& plan) {
  const ModelSpec& m = v.model;
  const Layout& l = v.layout;
  const double qk_dim = m.head_dim, v_dim = m.v_head_dim();
  const double heads = double(m.heads) / l.tp;
  double kv_heads = double(m.kv_heads) / l.tp;
  if (kv_heads < l.cp && v.job.ulysses_kv_replication) kv_heads = l.cp;
  const double per_head = v.tokens_cp * kActivationBytes;
  const double bwd = 1 + v.recompute_attention();
  plan.Add(CommKind::kContextParallel, "cp_ulysses_q", GroupKind::kCp, Collective::kAllToAll,
           per_head * heads * qk_dim, CommOp::kPerLayer, 1, bwd, false);
  plan.Add(CommKind::kContextParallel, "cp_ulysses_k", GroupKind::kCp, Collective::kAllToAll,
           per_head * kv_heads * qk_dim, CommOp::kPerLayer, 1, bwd, false);
  plan.Add(CommKind::kContextParallel, "cp_ulysses_v", GroupKind::kCp, Collective::kAllToAll,
           per_head * kv_heads * v_dim, CommOp::kPerLayer, 1, bwd, false);
  plan.Add(CommKind::kContextParallel, "cp_ulysses_out", GroupKind::kCp, Collective::kAllToAll,
           per_head * heads * v_dim, CommOp::kPerLayer, 1, bwd, false);
}

// Ring attention: CP-1 steps, each passing this rank's K and V block
// (mbs x S/CP tokens x a_kv/TP heads x (d_qk + d_v)) to the next rank,
// overlapped with the attention of the block in hand. Backward passes K/V
// and their gradients: twice the steps (about 3x forward volume in all).
void AddRingAttention(const Volumes& v, PlanBuilder& plan) {
  const ModelSpec& m = v.model;
  const Layout& l = v.layout;
  const double block = v.tokens_cp * double(m.kv_heads) / l.tp * (m.head_dim + m.v_head_dim()) * kActivationBytes;
  const double steps = l.cp - 1;
  plan.Add(CommKind::kContextParallel, "cp_ring_kv", GroupKind::kCp, Collective::kSendRecv, block,
           CommOp::kPerLayer, steps, 2 * steps + steps * v.recompute_attention(), true);
}

// The busiest rank's share of routed rows, over the mean: dropless routing
// follows the imbalance; a capacity factor pads every expert to CF x mean.
double LoadFactor(const JobSpec& j) { return j.capacity_factor > 0 ? j.capacity_factor : j.routing_imbalance; }

// Megatron's all-to-all dispatcher (cost-model.md section 4, steps 1-7).
void AddAllToAllDispatcher(const Volumes& v, PlanBuilder& plan) {
  const MoeSpec& e = *v.model.moe;
  const Layout& l = v.layout;
  const double rows = v.tokens * e.top_k * LoadFactor(v.job);  // the busiest rank's rows
  const double again = v.recompute_layer();
  const auto kind = CommKind::kExpertParallel;
  const auto scope = CommOp::kPerMoeLayer;
  // Token counts per expert, all-gathered over TP x EP before the splits
  // are known (a device-to-host sync follows; not modelled).
  plan.Add(kind, "moe_token_counts", GroupKind::kTpEp, Collective::kAllGather,
           double(l.etp) * l.ep * e.experts * kCountBytes, scope, 1, again, false);
  plan.Add(kind, "moe_dispatch", GroupKind::kEp, Collective::kAllToAll, rows * v.hidden * kActivationBytes, scope,
           1, 1 + again, false);
  plan.Add(kind, "moe_dispatch_probs", GroupKind::kEp, Collective::kAllToAll, rows * kProbBytes, scope, 1,
           1 + again, false);
  plan.Add(kind, "moe_combine", GroupKind::kEp, Collective::kAllToAll, rows * v.hidden * kActivationBytes, scope, 1,
           1 + again, false);
  // ETP: all-gather-v of the received rows (hidden + prob), reduce-scatter-v
  // of the expert output in the probs dtype; backward swaps them.
  const double etp = l.etp;
  plan.Add(kind, "moe_etp_allgather", GroupKind::kEtp, Collective::kAllGather,
           etp * rows * (v.hidden * kActivationBytes + kProbBytes), scope, 1, again, false);
  plan.Add(kind, "moe_etp_reducescatter", GroupKind::kEtp, Collective::kReduceScatter,
           etp * rows * v.hidden * kProbBytes, scope, 1, again, false);
  plan.Add(kind, "moe_etp_allgather_grad", GroupKind::kEtp, Collective::kReduceScatter,
           etp * rows * (v.hidden * kActivationBytes + kProbBytes), scope, 0, 1, false);
  plan.Add(kind, "moe_etp_reducescatter_grad", GroupKind::kEtp, Collective::kAllGather,
           etp * rows * v.hidden * kProbBytes, scope, 0, 1, false);
}

// Megatron's all-gather dispatcher: every rank of TP x EP gathers all the
// group's tokens (hidden states, the [T, E] routing map as bytes and the
// [T, E] probs in fp32), computes its experts, and reduce-scatters the
// outputs. Imbalance does not change the volume.
void AddAllGatherDispatcher(const Volumes& v, PlanBuilder& plan) {
  const MoeSpec& e = *v.model.moe;
  const double n = double(v.layout.etp) * v.layout.ep;
  const double again = v.recompute_layer();
  const double hidden = n * v.tokens * v.hidden * kActivationBytes;
  const double routing = n * v.tokens * e.experts * (1 + kProbBytes);
  const auto kind = CommKind::kExpertParallel;
  const auto scope = CommOp::kPerMoeLayer;
  plan.Add(kind, "moe_allgather_tokens", GroupKind::kTpEp, Collective::kAllGather, hidden + routing, scope, 1,
           again, false);
  plan.Add(kind, "moe_reducescatter_tokens", GroupKind::kTpEp, Collective::kReduceScatter, hidden, scope, 1, again,
           false);
  plan.Add(kind, "moe_allgather_tokens_grad", GroupKind::kTpEp, Collective::kReduceScatter,
           hidden + n * v.tokens * e.experts * kProbBytes, scope, 0, 1, false);
  plan.Add(kind, "moe_reducescatter_tokens_grad", GroupKind::kTpEp, Collective::kAllGather, hidden, scope, 0, 1,
           false);
}

// DeepEP-style (flex) dispatch over TP x EP: each token travels once per
// distinct destination rank (every ETP shard of each distinct EP rank),
// NVLink and network parts concurrent (the hierarchical all-to-all model).
// Per-node deduplication of the network part is not modelled (conservative).
void AddFlexDispatcher(const Volumes& v, PlanBuilder& plan) {
  const MoeSpec& e = *v.model.moe;
  const Layout& l = v.layout;
  const double destinations = l.etp * ExpectedDistinctRanks(e.experts, e.top_k, l.ep);
  const double bytes = v.tokens * destinations * v.hidden * kActivationBytes * LoadFactor(v.job);
  const double again = v.recompute_layer();
  plan.Add(CommKind::kExpertParallel, "moe_flex_dispatch", GroupKind::kTpEp, Collective::kAllToAll, bytes,
           CommOp::kPerMoeLayer, 1, 1 + again, false);
  plan.Add(CommKind::kExpertParallel, "moe_flex_combine", GroupKind::kTpEp, Collective::kAllToAll, bytes,
           CommOp::kPerMoeLayer, 1, 1 + again, false);
}

// One [mbs x S/(CP TP), H] activation per micro-batch per boundary forward,
// its gradient backward. Marked exposed: Megatron overlaps these with
// compute only in the interleaved schedule, and only partly
// (--overlap-p2p-communication); doc/cost-model.md counts them exposed.
void AddPipeline(const Volumes& v, PlanBuilder& plan) {
  plan.Add(CommKind::kPipeline, "pp_send_recv", GroupKind::kPp, Collective::kSendRecv,
           v.tokens * v.hidden * kActivationBytes, CommOp::kPerStageBoundary, 1, 1, false);
}

// Data parallel, once per step, overlapped with backward (gradients) and
// the next forward (parameters): dense parameters over DP x CP, routed
// experts over EDP. Per rank: the largest stage's parameters over TP (dense)
// or EP x ETP (experts). A distributed optimizer reduce-scatters fp32
// gradients and all-gathers bf16 parameters; without one, gradients are
// all-reduced.
void AddDataParallel(const Volumes& v, const CostContext& ctx, PlanBuilder& plan) {
  const Layout& l = v.layout;
  const DataParallelParams stage = LargestStage(l, v.model);
  struct Reduction {
    GroupKind group;
    double params_per_rank;
    const char* grad_rs;
    const char* param_ag;
    const char* grad_ar;
  };
  const Reduction reductions[] = {
      {GroupKind::kDpCp, stage.dense / l.tp, "dp_grad_reducescatter", "dp_param_allgather", "dp_grad_allreduce"},
      {GroupKind::kEdp, stage.expert / (double(l.ep) * l.etp), "edp_grad_reducescatter", "edp_param_allgather",
       "edp_grad_allreduce"},
  };
  for (const Reduction& r : reductions) {
    if (ctx.job->distributed_optimizer) {
      plan.Add(CommKind::kDataParallel, r.grad_rs, r.group, Collective::kReduceScatter,
               r.params_per_rank * kGradBytes, CommOp::kPerStep, 0, 1, true);
      plan.Add(CommKind::kDataParallel, r.param_ag, r.group, Collective::kAllGather,
               r.params_per_rank * kParamBytes, CommOp::kPerStep, 1, 0, true);
    } else {
      plan.Add(CommKind::kDataParallel, r.grad_ar, r.group, Collective::kAllReduce,
               r.params_per_rank * kGradBytes, CommOp::kPerStep, 0, 1, true);
    }
  }
}

}  // namespace

std::vector<CommOp> BuildCommPlan(const Layout& layout, const CostContext& ctx, const LayoutPlacement& placement) {
  std::vector<CommOp> ops;
  if (!ctx.cluster || !ctx.model || !ctx.job) return ops;
  std::optional<CommParams> defaults;
  if (!ctx.comm) defaults = DefaultCommParams(*ctx.cluster);
  const CommParams& params = ctx.comm ? *ctx.comm : *defaults;
  PlanBuilder plan(placement, params, ops);
  const Volumes v(layout, *ctx.model, *ctx.job);

  AddTensorParallel(v, plan);
  if (layout.cp_style == CpStyle::kUlysses) {
    AddUlysses(v, plan);
  } else {
    AddRingAttention(v, plan);
  }
  if (ctx.model->is_moe()) {
    switch (layout.dispatcher) {
      case Dispatcher::kAllToAll: AddAllToAllDispatcher(v, plan); break;
      case Dispatcher::kAllGather: AddAllGatherDispatcher(v, plan); break;
      case Dispatcher::kDeepEP:
      case Dispatcher::kHybridEP: AddFlexDispatcher(v, plan); break;
    }
  }
  AddPipeline(v, plan);
  AddDataParallel(v, ctx, plan);
  return ops;
}

std::vector<CommOp> BuildCommPlan(const Layout& layout, const CostContext& ctx) {
  if (!ctx.cluster || !ctx.model || !ctx.job) return {};
  std::optional<Topology> built;
  const Topology* topology = ctx.topology;
  if (!topology) {
    Result<Topology> topo = Topology::Build(*ctx.cluster);
    if (!topo.ok()) return {};
    built.emplace(std::move(topo).value());
    topology = &*built;
  }
  Result<LayoutPlacement> placement = PlaceGroups(layout, *topology);
  if (!placement.ok()) return {};
  return BuildCommPlan(layout, ctx, *placement);
}

}  // namespace foldplan
