// A layout's communication, op by op (cost-model.md section 4; the
// derivations are in doc/cost-model-comm.md).
#include "costmodel/comm_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>

#include "costmodel/collective_time_memo.h"
#include "costmodel/comm_params.h"
#include "costmodel/dtype_bytes.h"
#include "costmodel/rank_params.h"
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

unsigned RerunBlocks(const Recompute& recompute) {
  constexpr auto bit = [](Rerun block) { return 1u << static_cast<unsigned>(block); };
  // Recompute::has is true for every module under full recomputation; the
  // MoE checkpoint holds the shared experts too.
  unsigned blocks = 0;
  if (recompute.none()) return blocks;
  if (recompute.full()) blocks |= bit(Rerun::kLayer);
  if (recompute.has(RecomputeModule::kCoreAttn)) blocks |= bit(Rerun::kCoreAttention);
  if (recompute.has(RecomputeModule::kMlp)) blocks |= bit(Rerun::kDenseMlp);
  if (recompute.has(RecomputeModule::kMoe)) blocks |= bit(Rerun::kMoe) | bit(Rerun::kSharedExperts);
  if (recompute.has(RecomputeModule::kSharedExperts)) blocks |= bit(Rerun::kSharedExperts);
  return blocks;
}

void AddRecomputeCalls(const Recompute& recompute, std::vector<CommOp>* ops) {
  const unsigned blocks = RerunBlocks(recompute);
  if (blocks == 0) return;
  for (CommOp& op : *ops) {
    if (RepeatsCalls(op, blocks)) op.calls_bwd += op.rerun_calls;
  }
}

RecipeVariant CommFloorVariant(const RecipeVariant& v) {
  RecipeVariant least = v;
  least.recompute = Recompute::None();
  least.a2a_overlap = false;
  least.tp_overlap = false;
  return least;
}

FlexTokenCopies ExpectedFlexCopies(int experts, int top_k, int ep, int etp, const GroupSpan& span) {
  FlexTokenCopies c;
  ep = std::max(ep, 1);
  etp = std::max(etp, 1);
  const double n = double(ep) * etp;
  const double per_rank = static_cast<double>(experts) / ep;
  c.gpus = n * HitProbability(experts, top_k, per_rank);
  const int domains = std::max(span.domains, 1);
  double g_min = span.min_per_domain, g_max = span.max_per_domain;
  if (g_max < 1) {  // a span built by hand without counts: an even spread
    g_min = std::floor(n / domains);
    g_max = std::ceil(n / domains);
  }
  g_min = std::max(1.0, g_min);
  g_max = std::max(1.0, g_max);
  // Experts held by a domain of g group ranks: its g / etp expert-parallel
  // ranks' (ETP shards of one expert are neighbours in the group), at least
  // one rank's when the domain holds only some shards of it.
  auto experts_in = [&](double g) { return std::min<double>(experts, per_rank * std::max(1.0, g / etp)); };
  if (domains == 1 || n <= g_min) {
    c.domains = c.gpus > 0 ? 1 : 0;
    c.nvlink = n > 1 ? c.gpus * (n - 1) / n : 0;
    return c;
  }
  const double g_other = (n - g_min) / (domains - 1);
  c.network = (domains - 1) * HitProbability(experts, top_k, experts_in(g_other));
  c.domains = c.network + HitProbability(experts, top_k, experts_in(g_min));
  c.nvlink = c.gpus * (g_max - 1) / g_max;
  return c;
}

namespace {

constexpr double kActivationBytes = kBf16Bytes;  // bf16 activations (see the header on fp8)
constexpr double kProbBytes = kFp32Bytes;        // fp32 router probabilities
constexpr double kGradBytes = kFp32Bytes;        // fp32 gradient buffers
constexpr double kParamBytes = kBf16Bytes;       // bf16 parameters
constexpr double kCountBytes = 8;       // int64 token counts (Megatron's all-to-all dispatcher)
// The flex dispatcher (DeepEP's buffer interface, which Megatron's flex
// dispatcher calls and HybridEP mirrors):
constexpr double kFlexCountBytes = 4;     // int32 per-rank and per-expert token counts (notify)
constexpr double kTopkIndexBytes = 8;     // int64 topk_idx, sent with every dispatched copy
constexpr double kTopkWeightBytes = kFp32Bytes;  // fp32 topk_weights, likewise
// SMs an NCCL all-to-all (Megatron's alltoall dispatcher: grouped sends and
// receives) holds while it runs. NCCL runs one thread block per channel,
// each resident on an SM for the kernel's life; a grouped send/receive to
// many peers spreads them over the communicator's p2p channels, which NCCL
// sets to its channel count rounded up to a power of two. That count is
// 16 on an 8-GPU NVLink node with 8 NICs (two per NIC; the memory model's
// `nccl_collective_channels`, doc/cost-model-memory.md), so 16 SMs. An
// assumption, not a measurement: the channel count varies with topology,
// NCCL version and NCCL_MAX_P2P_NCHANNELS. Compute beside the kernel gets
// the other SMs (schedule.h, EP overlap).
constexpr int kNcclAllToAllSms = 16;

// Appends ops, timing each on its group's worst-case span; skips ops that
// move nothing (a one-rank group, zero bytes, no calls under any recompute
// set, so that recomputation never changes which ops a plan holds).
// `calls_bwd` is without recomputation; `rerun_calls` more where the
// layout's recompute set reruns `rerun` are added once the plan is built
// (AddRecomputeCalls, BuildPlan).
// Returns the op appended (valid until the next Add), or null.
class PlanBuilder {
 public:
  PlanBuilder(const LayoutPlacement& placement, const CommParams& params, std::vector<CommOp>& out,
              CollectiveTimeMemo* memo)
      : placement_(placement), params_(params), out_(out), memo_(memo) {}

  CommOp* Add(CommKind kind, const char* name, GroupKind group, Collective collective, double bytes,
              CommOp::Scope scope, double calls_fwd, double calls_bwd, bool overlappable,
              Rerun rerun = Rerun::kNever, double rerun_calls = 0) {
    const GroupPlacement& g = placement_.of(group);
    if (g.size < 2 || !(bytes > 0) || calls_fwd + calls_bwd + rerun_calls <= 0) return nullptr;
    const int key = static_cast<int>(collective);
    const CollectiveTimeMemo::Value* known = memo_ ? memo_->Find(group, key, bytes, 0) : nullptr;
    if (!known) {
      known = Remember(group, g, key, bytes, 0, [&]() -> CollectiveTimeMemo::Value {
        return {CollectiveTime(collective, bytes, g.span, params_, g.groups_sharing_links),
                RankTrafficOf(collective, bytes, g.span)};
      });
    }
    return Push(kind, name, group, collective, bytes, 0, scope, calls_fwd, calls_bwd, rerun, rerun_calls,
                overlappable, known->cost, known->traffic);
  }

  // A flex dispatcher op: `network_bytes` through the NIC and
  // `nvlink_bytes` over NVLink, concurrently (ForwardedAllToAllTime).
  CommOp* AddForwarded(const char* name, GroupKind group, double nvlink_bytes, double network_bytes,
                       CommOp::Scope scope, double calls_fwd, double calls_bwd, Rerun rerun, double rerun_calls) {
    const GroupPlacement& g = placement_.of(group);
    const double bytes = nvlink_bytes + network_bytes;
    if (g.size < 2 || !(bytes > 0) || calls_fwd + calls_bwd + rerun_calls <= 0) return nullptr;
    const int key = CollectiveTimeMemo::kForwarded;
    const CollectiveTimeMemo::Value* known = memo_ ? memo_->Find(group, key, nvlink_bytes, network_bytes) : nullptr;
    if (!known) {
      known = Remember(group, g, key, nvlink_bytes, network_bytes, [&]() -> CollectiveTimeMemo::Value {
        return {ForwardedAllToAllTime(nvlink_bytes, network_bytes, g.span, params_, g.groups_sharing_links), {}};
      });
    }
    // The RDMA copies to other units' domains cross the spine; the flex
    // model costs them all at the spine's rate when the group crosses it.
    const RankTraffic traffic{nvlink_bytes, network_bytes, g.span.crosses_spine ? network_bytes : 0};
    return Push(CommKind::kExpertParallel, name, group, Collective::kAllToAll, bytes, network_bytes, scope,
                calls_fwd, calls_bwd, rerun, rerun_calls, false, known->cost, traffic);
  }

  const GroupPlacement& of(GroupKind group) const { return placement_.of(group); }

  // ExpectedFlexCopies on `group`'s span, from the memo when there is one.
  FlexTokenCopies FlexCopies(int experts, int top_k, int ep, int etp, GroupKind group) {
    const GroupSpan& span = placement_.of(group).span;
    return memo_ ? memo_->FlexCopies(experts, top_k, ep, etp, span) : ExpectedFlexCopies(experts, top_k, ep, etp, span);
  }

 private:
  // Every field given: a value-initialised op would be zeroed first (GCC
  // clears it with rep stos, which is slow to start, once per op).
  CommOp* Push(CommKind kind, const char* name, GroupKind group, Collective collective, double bytes,
               double network_bytes, CommOp::Scope scope, double calls_fwd, double calls_bwd, Rerun rerun,
               double rerun_calls, bool overlappable, const CollectiveCost& cost, const RankTraffic& traffic) {
    return &out_.emplace_back(CommOp{.kind = kind,
                                     .name = name,
                                     .group = group,
                                     .collective = collective,
                                     .bytes = bytes,
                                     .network_bytes = network_bytes,
                                     .scope = scope,
                                     .calls_fwd = calls_fwd,
                                     .calls_bwd = calls_bwd,
                                     .rerun = rerun,
                                     .rerun_calls = rerun_calls,
                                     .seconds_per_call = cost.seconds,
                                     .algorithm = cost.algorithm,
                                     .overlappable = overlappable,
                                     .hides_behind_other_microbatch = false,
                                     .combine = false,
                                     .sms = 0,
                                     .traffic = traffic});
  }

  // A timing the memo lacks (a hit neither builds nor copies a value):
  // from its second level, which knows it when `placed`'s span was timed
  // so before, else `time()`d and kept there; then kept in the memo. With
  // no memo, kept until the next miss.
  template <typename Time>
  [[gnu::noinline]] const CollectiveTimeMemo::Value* Remember(GroupKind group, const GroupPlacement& placed, int key,
                                                              double bytes, double network_bytes, const Time& time) {
    if (!memo_) {
      timed_ = time();
      return &timed_;
    }
    const CollectiveTimeMemo::Value* known = memo_->FindOnSpan(key, bytes, network_bytes, placed);
    if (!known) known = memo_->PutOnSpan(key, bytes, network_bytes, placed, time());
    return memo_->Put(group, key, bytes, network_bytes, *known);
  }

  const LayoutPlacement& placement_;
  const CommParams& params_;
  std::vector<CommOp>& out_;
  CollectiveTimeMemo* memo_;  // null: time every op
  CollectiveTimeMemo::Value timed_;
};

// Sizes shared by the op builders below.
struct Volumes {
  Volumes(const Layout& l, const ModelSpec& m, const JobSpec& j) : Volumes(l, m, j, m.moe_layer_count()) {}
  Volumes(const Layout& l, const ModelSpec& m, const JobSpec& j, int moe_layer_count)
      : layout(l), model(m), job(j),
        tokens_cp(double(l.mbs) * j.seq_len / l.cp),
        tokens(tokens_cp / l.tp),
        hidden(m.hidden),
        dense_layers(m.layers > moe_layer_count),
        moe_layers(m.is_moe() && moe_layer_count > 0) {}
  const Layout& layout;
  const ModelSpec& model;
  const JobSpec& job;
  double tokens_cp;  // mbs x S / CP: a CP rank's tokens (the TP group's, gathered)
  double tokens;     // T = mbs x S / (CP x TP): a rank's tokens under SP
  double hidden;
  // The model has dense-MLP layers / MoE layers (an MTP module's layer is
  // of the last layer's kind, so present too).
  bool dense_layers;
  bool moe_layers;

};

// TP with sequence parallelism, per block (attention; dense MLP; shared
// experts), on [mbs x S/CP, H]: forward all-gather before the column-
// parallel GEMM and reduce-scatter after the row-parallel one; backward
// all-gathers the output gradient (row-parallel), reduce-scatters the input
// gradient (column-parallel), and re-gathers the input that SP did not keep
// for the weight gradient (overlapped with the data-gradient GEMM). A
// recomputed block repeats its forward pair. With TP communication overlap
// (--tp-comm-overlap, Transformer Engine's userbuffers) every one of them
// is pipelined with the GEMM it feeds or follows: overlappable.
void AddTensorParallel(const Volumes& v, PlanBuilder& plan) {
  const double bytes = v.tokens_cp * v.hidden * kActivationBytes;
  const bool overlap = v.layout.tp_overlap;
  struct Block {
    CommOp::Scope scope;
    const char* allgather;
    const char* reducescatter;
    const char* regather;
    bool present;
    Rerun rerun;  // its forward pair repeats when this block is recomputed
  };
  const ModelSpec& m = v.model;
  const bool shared_experts = m.is_moe() && m.moe->shared_experts > 0;
  const Block blocks[] = {
      {CommOp::kPerLayer, "tp_attn_allgather", "tp_attn_reducescatter", "tp_attn_regather", true, Rerun::kLayer},
      {CommOp::kPerDenseLayer, "tp_mlp_allgather", "tp_mlp_reducescatter", "tp_mlp_regather", v.dense_layers,
       Rerun::kDenseMlp},
      {CommOp::kPerMoeLayer, "tp_shared_allgather", "tp_shared_reducescatter", "tp_shared_regather",
       shared_experts, Rerun::kSharedExperts},
  };
  for (const Block& b : blocks) {
    if (!b.present) continue;
    plan.Add(CommKind::kTensorParallel, b.allgather, GroupKind::kTp, Collective::kAllGather, bytes, b.scope, 1, 1,
             overlap, b.rerun, 1);
    plan.Add(CommKind::kTensorParallel, b.reducescatter, GroupKind::kTp, Collective::kReduceScatter, bytes,
             b.scope, 1, 1, overlap, b.rerun, 1);
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
  const auto rerun = Rerun::kCoreAttention;
  plan.Add(CommKind::kContextParallel, "cp_ulysses_q", GroupKind::kCp, Collective::kAllToAll,
           per_head * heads * qk_dim, CommOp::kPerLayer, 1, 1, false, rerun, 1);
  plan.Add(CommKind::kContextParallel, "cp_ulysses_k", GroupKind::kCp, Collective::kAllToAll,
           per_head * kv_heads * qk_dim, CommOp::kPerLayer, 1, 1, false, rerun, 1);
  plan.Add(CommKind::kContextParallel, "cp_ulysses_v", GroupKind::kCp, Collective::kAllToAll,
           per_head * kv_heads * v_dim, CommOp::kPerLayer, 1, 1, false, rerun, 1);
  plan.Add(CommKind::kContextParallel, "cp_ulysses_out", GroupKind::kCp, Collective::kAllToAll,
           per_head * heads * v_dim, CommOp::kPerLayer, 1, 1, false, rerun, 1);
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
           CommOp::kPerLayer, steps, 2 * steps, true, Rerun::kCoreAttention, steps);
}

// EP overlap (--overlap-moe-expert-parallel-comm): the dispatch and combine
// all-to-alls run on a communication stream beside the other micro-batch's
// compute in the 1F1B steady state (the schedule decides how much hides).
void MarkEpOverlap(const Volumes& v, CommOp* op) {
  if (op && v.layout.a2a_overlap) op->hides_behind_other_microbatch = true;
}

// Megatron's all-to-all dispatcher (cost-model.md section 4, steps 1-7).
void AddAllToAllDispatcher(const Volumes& v, PlanBuilder& plan) {
  const MoeSpec& e = *v.model.moe;
  const Layout& l = v.layout;
  const double rows = v.tokens * e.top_k * ExpertLoadFactor(v.job, v.layout.ep);  // the busiest rank's rows
  const auto rerun = Rerun::kMoe;  // the forward calls recomputing the MoE layer repeats
  const auto kind = CommKind::kExpertParallel;
  const auto scope = CommOp::kPerMoeLayer;
  // Token counts per expert, all-gathered over TP x EP before the splits
  // are known (a device-to-host sync follows; not modelled). Stays exposed
  // under EP overlap: the host waits for it.
  plan.Add(kind, "moe_token_counts", GroupKind::kTpEp, Collective::kAllGather,
           double(l.etp) * l.ep * e.experts * kCountBytes, scope, 1, 0, false, rerun, 1);
  struct Part {
    const char* name;
    double bytes;
    bool combine;  // CommOp::combine
  };
  const Part parts[] = {{"moe_dispatch", rows * v.hidden * kActivationBytes, false},
                        {"moe_dispatch_probs", rows * kProbBytes, false},
                        {"moe_combine", rows * v.hidden * kActivationBytes, true}};
  for (const Part& p : parts) {
    CommOp* op = plan.Add(kind, p.name, GroupKind::kEp, Collective::kAllToAll, p.bytes, scope, 1, 1, false, rerun, 1);
    if (!op) continue;
    op->sms = kNcclAllToAllSms;
    op->combine = p.combine;
    MarkEpOverlap(v, op);
  }
  // ETP: all-gather-v of the received rows (hidden + prob), reduce-scatter-v
  // of the expert output in the probs dtype; backward swaps them. They run
  // in the experts' part of the layer, on the compute stream, under EP
  // overlap too.
  const double etp = l.etp;
  plan.Add(kind, "moe_etp_allgather", GroupKind::kEtp, Collective::kAllGather,
           etp * rows * (v.hidden * kActivationBytes + kProbBytes), scope, 1, 0, false, rerun, 1);
  plan.Add(kind, "moe_etp_reducescatter", GroupKind::kEtp, Collective::kReduceScatter,
           etp * rows * v.hidden * kProbBytes, scope, 1, 0, false, rerun, 1);
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
  const auto rerun = Rerun::kMoe;  // the forward calls recomputing the MoE layer repeats
  const double hidden = n * v.tokens * v.hidden * kActivationBytes;
  const double routing = n * v.tokens * e.experts * (1 + kProbBytes);
  const auto kind = CommKind::kExpertParallel;
  const auto scope = CommOp::kPerMoeLayer;
  plan.Add(kind, "moe_allgather_tokens", GroupKind::kTpEp, Collective::kAllGather, hidden + routing, scope, 1,
           0, false, rerun, 1);
  plan.Add(kind, "moe_reducescatter_tokens", GroupKind::kTpEp, Collective::kReduceScatter, hidden, scope, 1, 0,
           false, rerun, 1);
  plan.Add(kind, "moe_allgather_tokens_grad", GroupKind::kTpEp, Collective::kReduceScatter,
           hidden + n * v.tokens * e.experts * kProbBytes, scope, 0, 1, false);
  plan.Add(kind, "moe_reducescatter_tokens_grad", GroupKind::kTpEp, Collective::kAllGather, hidden, scope, 0, 1,
           false);
}

// The flex dispatcher (--moe-token-dispatcher-type flex), over TP x EP.
// DeepEP: a token goes once through the NIC to each distinct remote NVLink
// domain holding one of its experts (to the GPU on its own rail there),
// and the domain's entry GPUs forward it over NVLink to each distinct
// destination GPU; combine mirrors it (the entry GPU sums a domain's
// partial outputs before the RDMA back). HybridEP: the same inside one
// NVLink domain, NVLink only. Per rank and call, with T L the busiest
// rank's tokens (ExpectedFlexCopies for the copies):
//   network bytes = T L x copies.network x c,  nvlink bytes = T L x copies.nvlink x c
// with c the bytes of one copy: forward dispatch H b (fp8: H (1 + 1/32))
// plus top-k indices and weights K (8 + 4); combine H b; the backward's
// dispatch of the output gradient H b; its combine of the input gradient
// H b + K 4 (the probs' gradient). Before each forward dispatch the ranks
// exchange token counts (DeepEP's notify_dispatch) and the host waits for
// them: exposed even under EP overlap. HybridEP's metadata exchange is
// modelled the same way.
void AddFlexDispatcher(const Volumes& v, const CostContext& ctx, PlanBuilder& plan) {
  const MoeSpec& e = *v.model.moe;
  const Layout& l = v.layout;
  const FlexTokenCopies copies = plan.FlexCopies(e.experts, e.top_k, l.ep, l.etp, GroupKind::kTpEp);
  const double rows = v.tokens * ExpertLoadFactor(v.job, v.layout.ep);
  const auto rerun = Rerun::kMoe;  // the forward calls recomputing the MoE layer repeats
  const int sms = l.dispatcher == Dispatcher::kHybridEP ? ctx.job->hybridep_sms : ctx.job->deepep_sms;
  const double topk = e.top_k * (kTopkIndexBytes + kTopkWeightBytes);
  const double token_bf16 = v.hidden * kActivationBytes;
  const double token_dispatch =
      IsFp8(l.precision) ? v.hidden * Fp8DispatchBytesPerElement(l.precision) : token_bf16;
  const auto scope = CommOp::kPerMoeLayer;
  const double n = double(l.etp) * l.ep;
  if (CommOp* op = plan.Add(CommKind::kExpertParallel, "moe_flex_notify", GroupKind::kTpEp, Collective::kAllToAll,
                            (n + double(e.experts) * l.etp) * kFlexCountBytes, scope, 1, 0, false, rerun, 1)) {
    op->sms = sms;
  }
  struct Part {
    const char* name;
    double copy_bytes;
    double calls_fwd, calls_bwd, rerun_calls;
    bool combine;  // the combine or its gradient (CommOp::combine)
  };
  const Part parts[] = {
      {"moe_flex_dispatch", token_dispatch + topk, 1, 0, 1, false},
      {"moe_flex_combine", token_bf16, 1, 0, 1, true},
      {"moe_flex_dispatch_grad", token_bf16, 0, 1, 0, true},  // the combine's backward
      {"moe_flex_combine_grad", token_bf16 + e.top_k * kTopkWeightBytes, 0, 1, 0, false},  // the dispatch's backward
  };
  for (const Part& p : parts) {
    CommOp* op = plan.AddForwarded(p.name, GroupKind::kTpEp, rows * copies.nvlink * p.copy_bytes,
                                   rows * copies.network * p.copy_bytes, scope, p.calls_fwd, p.calls_bwd, rerun,
                                   p.rerun_calls);
    if (!op) continue;
    op->sms = sms;
    op->combine = p.combine;
    MarkEpOverlap(v, op);
  }
}

// One [mbs x S/(CP TP), H] activation per micro-batch per boundary forward,
// its gradient backward: one crossing of one stage boundary, also under
// the interleaved schedule (the schedule counts pp x vpp - 1 crossings per
// micro-batch; the last stage's loss and MTP stay on it).
void AddPipeline(const Volumes& v, PlanBuilder& plan) {
  plan.Add(CommKind::kPipeline, "pp_send_recv", GroupKind::kPp, Collective::kSendRecv,
           v.tokens * v.hidden * kActivationBytes, CommOp::kPerStageBoundary, 1, 1, false);
}

// Data parallel with the distributed optimizer (or plain DDP), once per
// step, overlapped with backward (gradients) and the next forward
// (parameters): dense parameters over DP x CP, routed experts over EDP.
// Per rank: the largest pipeline rank's share. A distributed optimizer
// reduce-scatters fp32 gradients and all-gathers bf16 parameters; without
// one, gradients are all-reduced.
void AddDataParallel(const Volumes& v, const CostContext& ctx, const RankParamCounter& params,
                     const PipelineDescription& pipeline, PlanBuilder& plan) {
  const StageParams stage = params.Largest(v.layout, pipeline);
  struct Reduction {
    GroupKind group;
    double params_per_rank;
    const char* grad_rs;
    const char* param_ag;
    const char* grad_ar;
  };
  const Reduction reductions[] = {
      {GroupKind::kDpCp, stage.dense, "dp_grad_reducescatter", "dp_param_allgather", "dp_grad_allreduce"},
      {GroupKind::kEdp, stage.expert, "edp_grad_reducescatter", "edp_param_allgather", "edp_grad_allreduce"},
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

// Megatron-FSDP (ZeRO-3, --use-megatron-fsdp): parameters, gradients and
// optimizer states sharded over DP x CP (dense) and EDP (routed experts).
// Per FSDP unit (a decoder layer, the embedding, the output layer) and per
// micro-batch: a bf16 all-gather of its parameters before its forward and
// again before its backward (resharded after each use; the backward's
// gather also serves a recomputed forward), and an fp32 reduce-scatter of
// its gradients after its backward. Per micro-batch, not per step: with
// sharded gradients there is no unsharded buffer to accumulate into, so
// Megatron-FSDP reduce-scatters in every micro-batch's backward (its
// no_sync does not skip it). Each is prefetched behind the neighbouring
// unit's compute: overlappable. No per-step data-parallel traffic remains.
void AddFsdp(const Volumes& v, const RankParamCounter& params, PlanBuilder& plan) {
  const Layout& l = v.layout;
  struct Unit {
    CommOp::Scope scope;
    GroupKind group;
    double params_per_rank;
    const char* allgather;
    const char* reducescatter;
  };
  const Unit units[] = {
      {CommOp::kPerDenseLayer, GroupKind::kDpCp, params.DenseLayer(l.tp), "fsdp_dense_layer_allgather",
       "fsdp_dense_layer_reducescatter"},
      {CommOp::kPerMoeLayer, GroupKind::kDpCp, params.MoeLayer(l.tp), "fsdp_moe_layer_allgather",
       "fsdp_moe_layer_reducescatter"},
      {CommOp::kPerMoeLayer, GroupKind::kEdp, params.Experts(l.ep, l.etp), "fsdp_experts_allgather",
       "fsdp_experts_reducescatter"},
      {CommOp::kPerEmbedding, GroupKind::kDpCp, params.Embedding(l.tp), "fsdp_embedding_allgather",
       "fsdp_embedding_reducescatter"},
      {CommOp::kPerOutputLayer, GroupKind::kDpCp, params.OutputLayer(l.tp, l.pp), "fsdp_output_allgather",
       "fsdp_output_reducescatter"},
  };
  for (const Unit& u : units) {
    if (u.scope == CommOp::kPerDenseLayer && !v.dense_layers) continue;
    if (u.scope == CommOp::kPerMoeLayer && !v.moe_layers) continue;
    plan.Add(CommKind::kDataParallel, u.allgather, u.group, Collective::kAllGather, u.params_per_rank * kParamBytes,
             u.scope, 1, 1, true);
    plan.Add(CommKind::kDataParallel, u.reducescatter, u.group, Collective::kReduceScatter,
             u.params_per_rank * kGradBytes, u.scope, 0, 1, true);
  }
}

}  // namespace

std::vector<CommOp> BuildCommPlan(const Layout& layout, const CostContext& ctx, const LayoutPlacement& placement) {
  if (!ctx.cluster || !ctx.model || !ctx.job) return {};
  return BuildCommPlan(layout, ctx, placement, DescribePipeline(layout, *ctx.model));
}

std::vector<CommOp> BuildCommPlan(const Layout& layout, const CostContext& ctx, const LayoutPlacement& placement,
                                  const PipelineDescription& pipeline) {
  return BuildCommPlan(layout, ctx, placement, pipeline, nullptr);
}

namespace {

// These three need every pointer of ctx but topology and profile
// (WithFullContext below). BuildLayerCommOps: every op but the
// data-parallel ones, in plan order.
void BuildLayerOps(const Layout& layout, const CostContext& ctx, const LayoutPlacement& placement,
                   CollectiveTimeMemo* memo, std::vector<CommOp>& ops) {
  ops.clear();
  // The most any layout appends: 9 TP (attention, dense MLP, shared
  // experts), 4 Ulysses, 8 for the all-to-all dispatcher with ETP, 1
  // pipeline, 10 FSDP.
  ops.reserve(32);
  PlanBuilder plan(placement, *ctx.comm, ops, memo);
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
      case Dispatcher::kHybridEP: AddFlexDispatcher(v, ctx, plan); break;
    }
  }
  AddPipeline(v, plan);
  if (layout.fsdp) AddFsdp(v, *ctx.rank_params, plan);
}

// AddStepCommOps: the data-parallel ops (none under FSDP, whose ops are
// per layer).
void AddStepOps(const Layout& layout, const CostContext& ctx, const LayoutPlacement& placement,
                const PipelineDescription& pipeline, CollectiveTimeMemo* memo, std::vector<CommOp>& ops) {
  if (layout.fsdp) return;
  PlanBuilder plan(placement, *ctx.comm, ops, memo);
  AddDataParallel(Volumes(layout, *ctx.model, *ctx.job), ctx, *ctx.rank_params, pipeline, plan);
}

void BuildPlan(const Layout& layout, const CostContext& ctx, const LayoutPlacement& placement,
               const PipelineDescription& pipeline, CollectiveTimeMemo* memo, std::vector<CommOp>& ops) {
  BuildLayerOps(layout, ctx, placement, memo, ops);
  AddStepOps(layout, ctx, placement, pipeline, memo, ops);
  AddRecomputeCalls(layout.recompute, &ops);
}

// `step` on a copy of ctx given what it lacks: DefaultCommParams and the
// model's RankParamCounter. Apart from the common path, where the context
// has both (GCC zeroes an optional's storage, 456 bytes for the
// parameters, on every call that declares one).
template <class Step>
[[gnu::noinline]] void CompletedContext(const CostContext& ctx, const Step& step) {
  CostContext full = ctx;
  std::optional<CommParams> comm;
  if (!full.comm) full.comm = &comm.emplace(DefaultCommParams(*ctx.cluster));
  std::optional<RankParamCounter> rank_params;
  if (!full.rank_params) full.rank_params = &rank_params.emplace(*ctx.model);
  step(full);
}

// `step(ctx)` on a context that has every part the builders read: ctx when
// it has, else a completed copy; nothing (false) without the cluster,
// model or job.
template <class Step>
bool WithFullContext(const CostContext& ctx, const Step& step) {
  if (!ctx.cluster || !ctx.model || !ctx.job) return false;
  if (!ctx.comm || !ctx.rank_params) {
    CompletedContext(ctx, step);
  } else {
    step(ctx);
  }
  return true;
}

}  // namespace

void BuildCommPlan(const Layout& layout, const CostContext& ctx, const LayoutPlacement& placement,
                   const PipelineDescription& pipeline, CollectiveTimeMemo* memo, std::vector<CommOp>* ops) {
  const bool built = WithFullContext(
      ctx, [&](const CostContext& full) { BuildPlan(layout, full, placement, pipeline, memo, *ops); });
  if (!built) ops->clear();
}

LayerCommKey LayerCommKeyOf(const Layout& l) {
  return {l.pp, l.tp, l.cp, l.ep, l.etp, l.mbs, l.cp_style, l.dispatcher, l.a2a_overlap, l.precision,
          l.fsdp, l.tp_overlap};
}

void BuildLayerCommOps(const Layout& layout, const CostContext& ctx, const LayoutPlacement& placement,
                       CollectiveTimeMemo* memo, std::vector<CommOp>* ops) {
  const bool built =
      WithFullContext(ctx, [&](const CostContext& full) { BuildLayerOps(layout, full, placement, memo, *ops); });
  if (!built) ops->clear();
}

void AddStepCommOps(const Layout& layout, const CostContext& ctx, const LayoutPlacement& placement,
                    const PipelineDescription& pipeline, CollectiveTimeMemo* memo, std::vector<CommOp>* ops) {
  WithFullContext(ctx, [&](const CostContext& full) { AddStepOps(layout, full, placement, pipeline, memo, *ops); });
}

std::vector<CommOp> BuildCommPlan(const Layout& layout, const CostContext& ctx, const LayoutPlacement& placement,
                                  const PipelineDescription& pipeline, CollectiveTimeMemo* memo) {
  std::vector<CommOp> ops;
  BuildCommPlan(layout, ctx, placement, pipeline, memo, &ops);
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
