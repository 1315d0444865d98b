// Compute seconds per micro-batch (compute_time.h; derivations in
// doc/cost-model-compute.md).
#include "costmodel/compute_time.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <initializer_list>
#include <limits>

#include "costmodel/compute_profile.h"
#include "costmodel/compute_time_parts.h"
#include "costmodel/dtype_bytes.h"
#include "costmodel/routing.h"

namespace foldplan {
namespace {

using compute_parts::Add;
using compute_parts::Assemble;
using compute_parts::ComputeShared;
using compute_parts::LayerSum;
using compute_parts::MtpParts;
using compute_parts::Rates;
using compute_parts::SharedTimes;

double GemmSeconds(const GemmShape& g, Precision precision, const Rates& rates) {
  const double flops = g.flops();
  if (flops <= 0) return 0;
  return flops / rates.Gemm(g, precision);
}

double GroupedSeconds(const GroupedGemmShape& g, Precision precision, const Rates& rates) {
  const double flops = g.flops();
  if (flops <= 0) return 0;
  return flops / rates.Grouped(g, precision);
}

double Seconds(const GemmShape& g, Precision precision, const Rates& rates) {
  return GemmSeconds(g, precision, rates);
}
double Seconds(const GroupedGemmShape& g, Precision precision, const Rates& rates) {
  return GroupedSeconds(g, precision, rates);
}

// Forward and backward of GEMMs (plain or grouped): backward runs dgrad
// and wgrad, each with the forward's FLOPs, at the forward's rate.
template <class Shape>
OpTime GemmsOf(std::initializer_list<Shape> shapes, Precision precision, const Rates& rates) {
  OpTime t;
  for (const Shape& g : shapes) {
    t.fwd_flops += g.flops();
    t.fwd_s += Seconds(g, precision, rates);
  }
  t.bwd_s = 2 * t.fwd_s;
  return t;
}
OpTime Gemms(std::initializer_list<GemmShape> shapes, Precision precision, const Rates& rates) {
  return GemmsOf(shapes, precision, rates);
}
OpTime GroupedGemms(std::initializer_list<GroupedGemmShape> shapes, Precision precision, const Rates& rates) {
  return GemmsOf(shapes, precision, rates);
}

int AtLeastOne(double x) { return std::max(1, int(std::lround(x))); }

// One attention kernel call of `flops` (the file's counting): forward at
// the forward rate; backward the forward + backward time (3.5 x flops at
// its rate) less the forward.
OpTime AttentionCall(const AttentionKernel& k, double flops, AttentionBackend backend, const Rates& rates) {
  OpTime t;
  t.fwd_s = flops / rates.Attention(backend, k, false);
  const double fwd_bwd_s = kAttentionFwdBwdFlopsRatio * flops / rates.Attention(backend, k, true);
  t.bwd_s = std::max(0.0, fwd_bwd_s - t.fwd_s);
  return t;
}

double CopySeconds(double bytes, const ComputeProfile& profile);

OpTime AttentionCore(const AttentionCoreShape& c, AttentionBackend backend, const Rates& rates) {
  OpTime t;
  t.fwd_flops = c.flops;
  if (c.flops <= 0) return t;
  // The kernel is batched over sequences and heads alike.
  AttentionKernel k;
  k.seq = c.seq;
  k.heads = AtLeastOne(c.batch * c.heads);
  k.kv_heads = AtLeastOne(c.batch * c.kv_heads);
  k.qk_head_dim = c.qk_head_dim;
  k.v_head_dim = c.v_head_dim;
  k.causal = true;
  if (c.ring_steps <= 1) {
    const OpTime call = AttentionCall(k, c.flops, backend, rates);
    t.fwd_s = call.fwd_s;
    t.bwd_s = call.bwd_s;
    return t;
  }
  // Ring CP, per step: step 0 causal over the local block (L = c.seq), the
  // other cp - 1 non-causal over L x L/2 or L/2 x L, looked up at the
  // equal-work square's side L / sqrt(2); every step the same FLOPs.
  const double steps = c.ring_steps;
  const double step_flops = c.flops / steps;
  const OpTime diagonal = AttentionCall(k, step_flops, backend, rates);
  AttentionKernel off = k;
  off.causal = false;
  off.seq = c.seq / std::sqrt(2.0);
  const OpTime other = AttentionCall(off, step_flops, backend, rates);
  const RingCorrectionBytes bytes = RingCorrectionBytesOf(c);
  t.fwd_s = diagonal.fwd_s + (steps - 1) * other.fwd_s + CopySeconds(bytes.fwd, rates.profile);
  t.bwd_s = diagonal.bwd_s + (steps - 1) * other.bwd_s + CopySeconds(bytes.bwd, rates.profile);
  return t;
}

double CopySeconds(double bytes, const ComputeProfile& profile) {
  return bytes / (profile.copy_gb_per_s() * 1e9);
}

// A memory-bound part: bytes read + written forward and backward.
OpTime Traffic(double fwd_bytes, double bwd_bytes, const ComputeProfile& profile) {
  OpTime t;
  t.fwd_s = CopySeconds(fwd_bytes, profile);
  t.bwd_s = CopySeconds(bwd_bytes, profile);
  return t;
}

// Activation function on `elements` outputs (SwiGLU: per output element,
// the input is twice as wide).
OpTime ActivationPass(Activation kind, double elements, const ComputeProfile& profile) {
  if (kind == Activation::kSwiGLU) {
    return Traffic(kSwigluFwdBytesPerElement * elements, kSwigluBwdBytesPerElement * elements,
                   profile);
  }
  return Traffic(kGeluFwdBytesPerElement * elements, kGeluBwdBytesPerElement * elements, profile);
}

OpTime RmsNorm(double elements, const ComputeProfile& profile) {
  return Traffic(kRmsNormFwdBytesPerElement * elements, kRmsNormBwdBytesPerElement * elements,
                 profile);
}

// FP8 quantization of FP8 linears: each GEMM's input [m, k] in forward and
// its output grad [m, n] in backward; weights [n, k] once per step, shared
// by the step's micro-batches (`weight_share` = 1 / m; NaN where the
// caller times no weight casts, so that a weight cast there shows).
struct Fp8Casts {
  Fp8CastBytes bytes;
  double weight_share = std::numeric_limits<double>::quiet_NaN();
  const ComputeProfile* profile = nullptr;

  bool on() const { return bytes.activation_bytes_per_element > 0; }
  OpTime Of(std::initializer_list<GemmShape> shapes) const {
    double in = 0, grad = 0;
    for (const GemmShape& g : shapes) in += g.m * g.k, grad += g.m * g.n;
    return Elements(in, grad);
  }
  OpTime OfGrouped(std::initializer_list<GroupedGemmShape> shapes) const {
    double in = 0, grad = 0;
    for (const GroupedGemmShape& g : shapes) {
      const double rows = g.experts * g.rows_per_expert;
      in += rows * g.k, grad += rows * g.n;
    }
    return Elements(in, grad);
  }
  OpTime Elements(double in, double grad) const {
    if (!on()) return {};
    return Traffic(bytes.activation_bytes_per_element * in,
                   bytes.activation_bytes_per_element * grad, *profile);
  }
  double WeightSeconds(double weight_elements) const {
    if (!on()) return 0;
    return CopySeconds(bytes.weight_bytes_per_element * weight_elements * weight_share, *profile);
  }
};

double WeightElements(std::initializer_list<GemmShape> shapes) {
  double e = 0;
  for (const GemmShape& g : shapes) e += g.m > 0 ? g.n * g.k : 0;
  return e;
}
double WeightElements(const GroupedGemmShape& g) {
  return g.rows_per_expert > 0 ? g.experts * g.n * g.k : 0;
}

// Permute and unpermute (with the alltoall dispatcher's chunk sorts) of one
// MoE layer on the busiest rank; forward and backward move the same bytes
// (the backward of a permute is an unpermute with the rows swapped and
// vice versa). doc: "Permute and unpermute".
OpTime PermuteTraffic(const LayerWork& w, const ModelSpec& model, const JobSpec& job,
                      const Layout& layout, const ComputeProfile& profile) {
  const MoeSpec& e = *model.moe;
  const double row_bytes = kBf16Bytes * model.hidden;
  const double tokens = w.router.m;  // T, the rank's sequence-parallel tokens
  const double received = w.experts_up.experts * w.experts_up.rows_per_expert;  // R
  const bool fused = job.moe_permute_fusion;
  double bytes = 0;
  if (layout.dispatcher == Dispatcher::kAllToAll) {
    // Source side: T tokens to T K copies (x capacity factor when padded),
    // and back after the combine.
    const double copies = tokens * e.top_k * (job.capacity_factor > 0 ? job.capacity_factor : 1);
    bytes = PermuteBytes(tokens, copies, row_bytes, fused) +
            UnpermuteBytes(copies, tokens, row_bytes, fused);
    // Receive side: chunks re-ordered from (source rank, expert) to
    // (expert, source rank) after the dispatch and back before the combine,
    // each a read + write of the R rows (fused or not).
    if (w.experts_up.experts > 1) bytes += 2 * (2 * received * row_bytes);
  } else {
    // allgather / flex (DeepEP, HybridEP): the receiving rank permutes the
    // distinct tokens that reach it (U) into R expert rows and sums them
    // back; allgather's unpermute writes its whole gathered buffer of
    // ep etp T rows (zeros where no local expert was chosen).
    const double distinct =
        std::min(received, layout.etp * tokens * ExpertLoadFactor(job, layout.ep) *
                               ExpectedDistinctRanks(e.experts, e.top_k, layout.ep));
    const double out = layout.dispatcher == Dispatcher::kAllGather
                           ? double(layout.ep) * layout.etp * tokens
                           : distinct;
    bytes = PermuteBytes(distinct, received, row_bytes, fused) +
            UnpermuteBytes(received, out, row_bytes, fused);
  }
  return Traffic(bytes, bytes, profile);
}

uint32_t Bit(RecomputeModule m) { return 1u << int(m); }

// The modules of a recompute set (under full: every one).
uint32_t ModulesOf(Recompute rc) {
  uint32_t modules = 0;
  for (int m = 0; m < kRecomputeModuleCount; ++m) {
    if (rc.has(static_cast<RecomputeModule>(m))) modules |= Bit(static_cast<RecomputeModule>(m));
  }
  return modules;
}

// The first half of a layer, every kind alike: input norms, attention
// projections, rotary, the attention core and the residual adds. Reads of
// `layout` tp, cp, mbs and cp_style (through `w`) and the precision.
void AddAttention(const LayerWork& w, const ModelSpec& model, const JobSpec& job, const Layout& layout,
                  const Fp8Casts& fp8, const Rates& rates, LayerSum& s) {
  const ComputeProfile& profile = rates.profile;
  LayerTimes& t = s.t;
  const Precision precision = layout.precision;
  auto put = [&](OpTime& part, const OpTime& x, uint32_t modules) { s.Put(part, x, modules); };
  const bool mla = w.k.m <= 0;
  const double hidden = model.hidden;
  const double tokens = double(layout.mbs) * job.seq_len / layout.cp;  // M: TP-split rows
  const double sp_tokens = tokens / layout.tp;                         // T: sequence-parallel rows
  double& weights = s.weights;
  // ---- attention ----
  put(t.norms, RmsNorm(2 * sp_tokens * hidden, profile), Bit(RecomputeModule::kLayernorm));
  if (!mla) {
    // GQA/MHA: Megatron's linear_qkv is one GEMM of the three widths.
    const GemmShape qkv = {w.q.m, w.q.n + w.k.n + w.v.n, w.q.k};
    put(t.attention_projections, Gemms({qkv, w.o}, precision, rates), 0);
    put(t.fp8_casts, fp8.Of({qkv, w.o}), 0);
    weights += WeightElements({qkv, w.o});
    // q and k, per head: [M, a / tp, d] and [M, a_kv / tp, d].
    const double qk_elements = w.q.m * (w.q.n + w.k.n);
    if (model.qk_norm) put(t.qk_norm, RmsNorm(qk_elements, profile), 0);
    // RoPE, unless the model has learned absolute positions (GPT-3).
    if (!model.learned_positions) {
      const double rope = kRotaryBytesPerElement * qk_elements;
      put(t.rotary, Traffic(rope, rope, profile), 0);
    }
  } else {
    const MlaSpec& a = *model.mla;
    put(t.attention_projections, Gemms({w.q, w.q_a, w.kv_a, w.o}, precision, rates), 0);
    put(t.fp8_casts, fp8.Of({w.q, w.q_a, w.kv_a, w.o}), 0);
    // mla_up_proj: the q and kv up-projections and the rope applied to them.
    const uint32_t up = Bit(RecomputeModule::kMlaUpProj);
    put(t.attention_projections, Gemms({w.q_b, w.kv_b}, precision, rates), up);
    put(t.fp8_casts, fp8.Of({w.q_b, w.kv_b}), up);
    weights += WeightElements({w.q, w.q_a, w.kv_a, w.o, w.q_b, w.kv_b});
    // The latent norms (Megatron's q_layernorm, kv_layernorm) on T rows.
    const double q_latent = w.q_a.m > 0 ? double(a.q_lora_rank) : 0;
    put(t.qk_norm, RmsNorm(sp_tokens * (q_latent + a.kv_lora_rank), profile), 0);
    // Fused MLA rope kernels: q is read and written whole ([M, a d_qk / tp]);
    // the kv kernel reads kv_b's output ([M, a (d_nope + d_v) / tp]) and
    // writes k ([M, a d_qk / tp]) and v ([M, a d_v / tp]).
    const GemmShape& q_out = w.q_b.m > 0 ? w.q_b : w.q;
    const double heads_per_rank = double(model.heads) / layout.tp;
    const double qk_dim = double(a.qk_nope_head_dim) + a.qk_rope_head_dim;
    const double q_bytes = kRotaryBytesPerElement * q_out.m * q_out.n;
    const double kv_bytes =
        kBf16Bytes * tokens * (w.kv_b.n + heads_per_rank * (qk_dim + a.v_head_dim));
    put(t.rotary, Traffic(q_bytes + kv_bytes, q_bytes + kv_bytes, profile), up);
  }
  put(t.attention_core, AttentionCore(w.core, job.attention_backend, rates), Bit(RecomputeModule::kCoreAttn));
  const double residual = sp_tokens * hidden;
  put(t.residual_adds,
      Traffic(2 * kResidualAddFwdBytesPerElement * residual,
              2 * kResidualAddBwdBytesPerElement * residual, profile),
      0);
}

// The second half: the dense MLP, or the MoE block (router, permute,
// routed and shared experts). Reads of `layout` what `w` does, the
// precision, and for the MoE block ep, etp and the dispatcher.
void AddFeedForward(const LayerWork& w, const ModelSpec& model, const JobSpec& job, const Layout& layout,
                    const Fp8Casts& fp8, const Rates& rates, LayerSum& s) {
  const ComputeProfile& profile = rates.profile;
  LayerTimes& t = s.t;
  const Precision precision = layout.precision;
  auto put = [&](OpTime& part, const OpTime& x, uint32_t modules) { s.Put(part, x, modules); };
  // The experts' parts: the dense MLP, the routed and shared experts with
  // their activations and their GEMMs' FP8 casts (what Megatron's combined
  // 1F1B schedule runs as a layer's "mlp" node, between the dispatch and
  // the combine).
  auto put_experts = [&](OpTime& part, const OpTime& x, uint32_t modules) { s.PutExperts(part, x, modules); };
  const uint32_t moe_module = Bit(RecomputeModule::kMoe);
  const double tokens = double(layout.mbs) * job.seq_len / layout.cp;
  const double residual = tokens / layout.tp * model.hidden;
  double& weights = s.weights;
  // ---- dense MLP ----
  if (!w.moe) {
    const uint32_t m = Bit(RecomputeModule::kMlp);
    put_experts(t.mlp, Gemms({w.mlp_up, w.mlp_down}, precision, rates), m);
    put_experts(t.mlp_activation, ActivationPass(model.activation, w.mlp_down.m * w.mlp_down.k, profile), m);
    put_experts(t.fp8_casts, fp8.Of({w.mlp_up, w.mlp_down}), m);
    weights += WeightElements({w.mlp_up, w.mlp_down});
  } else {
    // ---- MoE: router, permute, routed experts, shared experts ----
    const MoeSpec& e = *model.moe;
    put(t.router, Gemms({w.router}, Precision::kBF16, rates), moe_module);
    const double scores = w.router.m * e.experts;
    const bool rf = job.moe_router_fusion;
    put(t.router_scores,
        Traffic((rf ? kRouterFusedFwdBytesPerScore : kRouterUnfusedFwdBytesPerScore) * scores,
                (rf ? kRouterFusedBwdBytesPerScore : kRouterUnfusedBwdBytesPerScore) * scores,
                profile),
        moe_module);
    put(t.permute, PermuteTraffic(w, model, job, layout, profile), moe_module);
    put_experts(t.routed_experts, GroupedGemms({w.experts_up, w.experts_down}, precision, rates),
                moe_module);
    const double expert_out =
        w.experts_down.experts * w.experts_down.rows_per_expert * w.experts_down.k;
    put_experts(t.expert_activation, ActivationPass(model.activation, expert_out, profile),
                moe_module | Bit(RecomputeModule::kMoeAct));
    put_experts(t.fp8_casts, fp8.OfGrouped({w.experts_up, w.experts_down}), moe_module);
    weights += WeightElements(w.experts_up) + WeightElements(w.experts_down);

    if (w.shared_up.m > 0) {
      const uint32_t shared_modules = moe_module | Bit(RecomputeModule::kSharedExperts);
      OpTime shared = Gemms({w.shared_up, w.shared_down}, precision, rates);
      Add(shared, Gemms({w.shared_gate}, Precision::kBF16, rates));
      put_experts(t.shared_experts, shared, shared_modules);
      put_experts(t.shared_activation,
                  ActivationPass(model.activation, w.shared_down.m * w.shared_down.k, profile), shared_modules);
      if (w.shared_gate.m > 0) {
        // sigmoid(gate) x the shared output [T, H].
        put_experts(t.shared_activation,
                    Traffic(kGateMultiplyFwdBytesPerElement * residual,
                            kGateMultiplyBwdBytesPerElement * residual, profile),
                    shared_modules);
      }
      put_experts(t.fp8_casts, fp8.Of({w.shared_up, w.shared_down}), shared_modules);
      weights += WeightElements({w.shared_up, w.shared_down});
      // The MoE output is routed + shared (inside the MoE module): an add
      // forward; backward hands the same grad to both branches.
      put(t.residual_adds, Traffic(kResidualAddFwdBytesPerElement * residual, 0, profile),
          moe_module);
    }
  }
}

// A summed layer's times but its weight casts (PutWeightCasts), with the
// recompute sums of `rc` from its pieces in order (into `pieces` too when
// given).
LayerTimes FinishLayer(const LayerSum& s, Recompute rc, LayerRecomputePieces* pieces) {
  LayerTimes t = s.t;
  s.pieces.Apply(rc, t);
  if (pieces) *pieces = s.pieces;
  return t;
}

}  // namespace

RingCorrectionBytes RingCorrectionBytesOf(const AttentionCoreShape& c) {
  RingCorrectionBytes b;
  if (c.ring_steps <= 1) return b;
  const double steps = c.ring_steps;
  const double block = c.seq;  // L: the rank's query rows, and each step's KV rows
  const double q_rows = c.batch * c.heads * block;
  const double kv_rows = c.batch * std::max(1.0, c.kv_heads) * block;
  const double d_qk = c.qk_head_dim, d_v = c.v_head_dim;
  // Forward: every step's output merged into the running output (the first
  // as its start), cp - 1 LSE merges, the first step's LSE copied once; L
  // query rows each step (the busiest rank, cp - 1).
  b.fwd = q_rows * d_v * (kRingOutInitBytesPerElement + (steps - 1) * kRingOutCorrectionBytesPerElement) +
          q_rows * (kRingLseCopyBytesPerRow + steps * kRingOutCorrectionBytesPerRow +
                    (steps - 1) * kRingLseCorrectionBytesPerRow);
  // Backward: each step's dq and dkv accumulated, the first copied; an
  // off-diagonal step has L query rows against L/2 KV rows or L/2 against
  // L, the busier of the two on every step.
  const double dq = q_rows * d_qk, dkv = kv_rows * (d_qk + d_v);
  b.bwd = kRingGradCopyBytesPerElement * (dq + dkv) +
          (steps - 1) * kRingGradAddBytesPerElement * std::max(dq + dkv / 2, dq / 2 + dkv);
  return b;
}

double PermuteBytes(double in_rows, double out_rows, double row_bytes, bool fused) {
  return (fused ? in_rows + out_rows : 2 * out_rows) * row_bytes;
}

double UnpermuteBytes(double in_rows, double out_rows, double row_bytes, bool fused) {
  return (fused ? in_rows + out_rows : out_rows + 3 * in_rows) * row_bytes;
}

Fp8CastBytes Fp8CastBytesOf(Precision precision) {
  // Read bf16 (2), write the rowwise and the columnwise fp8 copy (1 + 1);
  // tensorwise reads the bf16 input once more for its amax; block scales
  // are written for each copy.
  constexpr double kCast = kBf16Bytes + 2 * kFp8Bytes;
  constexpr double kBlock = 2 * kFp8BlockScaleBytesPerElement;
  constexpr double kWeightBlock = 2 * kFp8WeightBlockScaleBytesPerElement;
  constexpr double kMx = 2 * kMxfp8ScaleBytesPerElement;
  switch (precision) {
    case Precision::kBF16: return {0, 0};
    case Precision::kFP8Delayed: return {kCast, kCast};
    case Precision::kFP8Tensorwise: return {kCast + kBf16Bytes, kCast + kBf16Bytes};
    case Precision::kFP8Blockwise: return {kCast + kBlock, kCast + kWeightBlock};
    case Precision::kMXFP8: return {kCast + kMx, kCast + kMx};
  }
  return {0, 0};
}

long long MicroBatchesPerStep(const JobSpec& job, const Layout& layout) {
  const long long per = static_cast<long long>(std::max(1, layout.dp)) * std::max(1, layout.mbs);
  return std::max<long long>(1, job.global_batch / per);
}

ComputeTimes ComputeLayerTimes(const Layout& layout, const CostContext& ctx) {
  return ComputeLayerTimes(layout, ctx, nullptr, nullptr, nullptr);
}

void LayerRecomputePieces::Add(const OpTime& x, uint32_t modules, bool experts) {
  assert(count < static_cast<int>(pieces.size()));
  pieces[static_cast<size_t>(count++)] = {x.fwd_s, x.fwd_flops, modules, experts};
}

void LayerRecomputePieces::Apply(Recompute rc, LayerTimes& times) const {
  const uint32_t rc_modules = ModulesOf(rc);
  times.recompute_s = 0;
  times.recompute_flops = 0;
  times.recompute_experts_s = 0;
  for (int i = 0; i < count; ++i) {
    const Piece& p = pieces[static_cast<size_t>(i)];
    if (rc.full() || (rc_modules & p.modules) != 0) {
      times.recompute_s += p.fwd_s;
      times.recompute_flops += p.fwd_flops;
      if (p.experts) times.recompute_experts_s += p.fwd_s;
    }
  }
}

namespace {

// The casts of the layout's precision; `job` given: with the weight casts'
// share of its micro-batches per step.
Fp8Casts Fp8CastsOf(const Layout& layout, const JobSpec* job, const ComputeProfile& profile) {
  Fp8Casts fp8;
  fp8.bytes = Fp8CastBytesOf(layout.precision);
  if (job) fp8.weight_share = 1.0 / double(MicroBatchesPerStep(*job, layout));
  fp8.profile = &profile;
  return fp8;
}

OpTime MtpProjection(const MtpParts& p, const Fp8Casts& fp8) {
  OpTime t = p.head;
  t.fwd_s += fp8.WeightSeconds(p.weight_elements);
  for (const OpTime& x : p.tail) Add(t, x);
  return t;
}

// The times that read the micro-batches per step (through fp8's weight
// share): each layer's weight casts, `dense_weights` and `moe_weights`
// elements once per step (never recomputed), and the MTP projection.
void PutWeightCasts(const Fp8Casts& fp8, double dense_weights, double moe_weights, const MtpParts& mtp,
                    const ModelSpec& model, ComputeTimes* out) {
  out->dense_layer.fp8_weight_casts.fwd_s = fp8.WeightSeconds(dense_weights);
  if (model.is_moe()) out->moe_layer.fp8_weight_casts.fwd_s = fp8.WeightSeconds(moe_weights);
  if (model.mtp_layers > 0) out->mtp_projection = MtpProjection(mtp, fp8);
}

}  // namespace

namespace compute_parts {

void ComputeShared(const Layout& layout, const CostContext& ctx, const Rates& rates, SharedTimes* out) {
  const ModelSpec& model = *ctx.model;
  const JobSpec& job = *ctx.job;
  const ComputeProfile& profile = *ctx.profile;
  const Fp8Casts fp8 = Fp8CastsOf(layout, nullptr, profile);  // no weight casts here
  SharedTimes& s = *out;
  s = SharedTimes{};
  const LayerWork dense = LayerForwardWork(model, job, layout, false);
  AddAttention(dense, model, job, layout, fp8, rates, s.dense);
  AddFeedForward(dense, model, job, layout, fp8, rates, s.dense);
  if (model.is_moe()) {
    AddAttention(LayerForwardWork(model, job, layout, true), model, job, layout, fp8, rates, s.moe_attention);
  }

  // Tokens whose embeddings and logits this rank handles: vocab-parallel
  // layers see the all-gathered mbs S / cp tokens, 1/tp of the vocabulary.
  const double tokens = double(layout.mbs) * job.seq_len / layout.cp;
  const double sp_tokens = tokens / layout.tp;
  const double hidden = model.hidden;
  const double vocab_per_rank = double(model.vocab) / layout.tp;
  const OpTime lookup = Traffic(kEmbeddingFwdBytesPerTokenHidden * tokens * hidden,
                                kEmbeddingBwdBytesPerTokenHidden * tokens * hidden +
                                    kEmbeddingBwdBytesPerTableElement * vocab_per_rank * hidden,
                                profile);
  s.embedding = lookup;

  if (model.mtp_layers > 0) {
    // MTP: [mbs S / cp, 2H] x [2H, H / tp] per rank (a column-parallel
    // linear like the other TP-split GEMMs), with its FP8 casts; the
    // next-token embedding lookup (the embedding's own traffic); the norms
    // of the hidden state and of that embedding, [T, H] each, and their
    // concat into [T, 2H].
    const GemmShape proj = {tokens, hidden / layout.tp, 2 * hidden};
    s.mtp.head = Gemms({proj}, layout.precision, rates);
    Add(s.mtp.head, fp8.Of({proj}));
    s.mtp.weight_elements = WeightElements({proj});
    s.mtp.tail = {lookup, RmsNorm(2 * sp_tokens * hidden, profile),
                  Traffic(kMtpConcatFwdBytesPerTokenHidden * sp_tokens * hidden, 0, profile)};
  }

  // The final norm on [T, H], the logits GEMM (bf16) and the loss.
  const GemmShape logits = OutputLayerWork(model, job, layout);
  s.output_layer = Gemms({logits}, Precision::kBF16, rates);
  Add(s.output_layer, RmsNorm(sp_tokens * hidden, profile));
  const double logit_elements = logits.m * logits.n;
  Add(s.output_layer, Traffic(kLossFwdBytesPerLogit * logit_elements,
                              kLossBwdBytesPerLogit * logit_elements, profile));
}

ComputeTimes Assemble(const SharedTimes& s, const Layout& layout, const CostContext& ctx, const Rates& rates,
                      LayerRecomputePieces* dense_pieces, LayerRecomputePieces* moe_pieces, double* moe_weights) {
  const ModelSpec& model = *ctx.model;
  const JobSpec& job = *ctx.job;
  const Fp8Casts fp8 = Fp8CastsOf(layout, &job, *ctx.profile);
  ComputeTimes out;
  out.dense_layer = FinishLayer(s.dense, layout.recompute, dense_pieces);
  LayerSum moe;
  if (model.is_moe()) {
    moe = s.moe_attention;
    AddFeedForward(LayerForwardWork(model, job, layout, true), model, job, layout, fp8, rates, moe);
    out.moe_layer = FinishLayer(moe, layout.recompute, moe_pieces);
  }
  out.embedding = s.embedding;
  out.output_layer = s.output_layer;
  PutWeightCasts(fp8, s.dense.weights, moe.weights, s.mtp, model, &out);
  if (moe_weights) *moe_weights = moe.weights;
  return out;
}

void PutWeightCastsOf(const Layout& layout, const CostContext& ctx, double dense_weights, double moe_weights,
                      const MtpParts& mtp, ComputeTimes* out) {
  PutWeightCasts(Fp8CastsOf(layout, ctx.job, *ctx.profile), dense_weights, moe_weights, mtp, *ctx.model, out);
}

}  // namespace compute_parts

ComputeTimes ComputeLayerTimes(const Layout& layout, const CostContext& ctx, LayerRecomputePieces* dense_pieces,
                               LayerRecomputePieces* moe_pieces, ComputeRateMemo* rate_memo) {
  const Rates rates{*ctx.profile, rate_memo};
  SharedTimes shared;
  ComputeShared(layout, ctx, rates, &shared);
  return Assemble(shared, layout, ctx, rates, dense_pieces, moe_pieces);
}

double OptimizerStepSeconds(double params_per_rank, const ComputeProfile& profile) {
  return CopySeconds(kAdamBytesPerParam * params_per_rank, profile);
}

}  // namespace foldplan
