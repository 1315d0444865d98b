#include "costmodel/host_time.h"

#include <algorithm>

#include "planner/legality.h"

namespace foldplan {
namespace {

// The counts below are read off the code paths Megatron-Core runs with the
// Transformer Engine layer spec (sequence parallel with tp > 1, fused
// RoPE, bias-dropout-add and SwiGLU, permute and router fusion, TE's
// GroupedLinear), op by op; doc/cost-model-host.md lists each with its
// source. They are counted from the code, not traced: a trace of one layer
// (torch.profiler) would replace them.

// A collective call, or the kernels Transformer Engine's userbuffers
// launch in its place when TP communication overlaps its GEMMs (a copy
// into the userbuffer and the ring exchange's kernel).
struct TpComm {
  double collectives = 0, launches = 0;
};
TpComm TpCollectives(const HostKey& k, double calls) {
  if (!k.tp) return {};
  if (k.tp_overlap) return {0, 2 * calls};
  return {calls, 0};
}

void AddTp(HostOps& o, const HostKey& k, double forward_calls, double backward_calls) {
  const TpComm f = TpCollectives(k, forward_calls), b = TpCollectives(k, backward_calls);
  o.collectives += f.collectives;
  o.launches += f.launches;
  o.backward_collectives += b.collectives;
  o.backward_launches += b.launches;
}

// Transformer Engine's FP8 linear: the input quantized (and, for the
// current-scaling recipes, its amax taken) in C++ before the GEMM, the
// output gradient likewise in backward.
void AddFp8Linears(HostOps& o, const HostKey& k, double linears) {
  if (!IsFp8(k.precision)) return;
  o.launches += 2 * linears;
  o.backward_launches += 2 * linears;
}

HostOps Attention(const HostKey& k, const ModelSpec& m) {
  HostOps o;
  if (m.attention == AttentionKind::kMLA) {
    // Input norm (TENorm); q down (TELinear), q up with its norm
    // (TELayerNormColumnParallelLinear), kv down, kv up with its norm;
    // the rope halves of q and k split, rotated and concatenated back; the
    // core; the output projection; bias-dropout-add.
    o.modules = 7;
    o.eager_ops = 15;  // norm, 4 GEMMs, 2 norms, 2 rope, 3 concat / expand, core, proj, residual
    o.views = 8;
    o.backward_kernels = 21;  // 5 GEMMs x 2, 3 norms, 2 rope, 3 slices, core 2, residual 1
    AddTp(o, k, 3, 4);       // latents gathered (q, kv), output reduce-scattered; mirrored, plus the wgrad re-gather
    AddFp8Linears(o, k, 5);
  } else {
    // Norm + fused QKV GEMM (TELayerNormColumnParallelLinear), the split of
    // q, k, v, fused RoPE on q and k, the core (TEDotProductAttention), the
    // output projection (TERowParallelLinear), bias-dropout-add.
    o.modules = 3;
    o.eager_ops = 7;
    o.views = 5;
    o.backward_kernels = 10;  // QKV dgrad + wgrad + norm, 2 rope, core 2, proj dgrad + wgrad, residual
    if (m.qk_norm) {
      o.modules += 2;
      o.eager_ops += 2;
      o.backward_kernels += 4;
    }
    AddTp(o, k, 2, 3);  // all-gather before QKV, reduce-scatter after the projection; backward adds the re-gather
    AddFp8Linears(o, k, 2);
  }
  if (k.ulysses) {
    // Transformer Engine's a2a context parallelism: QKV in, output back;
    // the head/sequence layout changes around each.
    o.alltoallvs += 2;
    o.eager_ops += 4;
    o.backward_alltoallvs += 2;
    o.backward_kernels += 4;
  } else if (k.ring_steps > 0) {
    // TE's p2p ring: per further step a batched send/recv of K and V, the
    // step's attention kernel and the output and LSE correction (2
    // kernels); the sequence chunked into halves first. Backward likewise,
    // dK and dV travelling with K and V.
    const double steps = k.ring_steps;
    o.collectives += steps;
    o.eager_ops += 3 * steps;
    o.views += 4;
    o.backward_collectives += steps;
    o.backward_kernels += 3 * steps;
  }
  return o;
}

HostOps DenseMlp(const HostKey& k) {
  // Norm + FC1 (TELayerNormColumnParallelLinear), SwiGLU, FC2
  // (TERowParallelLinear), bias-dropout-add.
  HostOps o;
  o.modules = 2;
  o.eager_ops = 5;
  o.backward_kernels = 6;
  AddTp(o, k, 2, 3);
  AddFp8Linears(o, k, 2);
  return o;
}

HostOps MoeRouter(const HostKey& k) {
  // pre_mlp_layernorm (TENorm); TopKRouter: the input cast to fp32, the
  // gating GEMM, the fused top-k with its score function, the auxiliary
  // loss (fused scores, tokens per expert, fused loss, its autograd
  // scaler) and the loss tracker's two updates.
  HostOps o;
  o.modules = 2;
  o.eager_ops = 10;
  o.views = 3;
  o.backward_kernels = 7;
  // The auxiliary loss's tokens per expert summed over the TP x CP group.
  if (k.tp_cp) o.collectives += 1;
  return o;
}

HostOps MoePreprocess(const HostKey& k, const JobSpec& job) {
  HostOps o;
  const bool syncs = rules::DispatchSyncsHost(job, k.dispatcher);
  switch (k.dispatcher) {
    case Dispatcher::kAllToAll:
      // Tokens per expert, the input and output split sizes and the tokens
      // per local expert, each summed and copied to the host; the counts
      // all-gathered over TP x EP; then the stream sync that makes the
      // copies readable. Padded to capacity the counts are static: only
      // the routing map's bookkeeping remains.
      o.eager_ops = syncs ? 9 : 4;
      o.views = 2;
      if (k.ep_tp && syncs) o.collectives = 1;
      break;
    case Dispatcher::kAllGather:
      // The hidden states, probabilities and routing map gathered over
      // TP x EP, the local mask and indices, and the tokens per expert the
      // grouped GEMM reads as a host list.
      o.eager_ops = 4;
      o.views = 2;
      if (k.ep_tp) o.collectives = 3;
      o.backward_collectives = k.ep_tp ? 1 : 0;  // the gathered states' gradient reduce-scattered
      break;
    case Dispatcher::kDeepEP:
    case Dispatcher::kHybridEP:
      // Indices and probabilities from the routing map, the dispatch
      // layout (a C++ launch); the flex dispatch itself waits (below).
      o.eager_ops = 4;
      o.launches = 1;
      o.views = 2;
      break;
  }
  // The flex dispatchers wait inside the dispatch (kMoeDispatch).
  if (syncs && !IsFlex(k.dispatcher)) o.syncs = 1;
  return o;
}

HostOps MoeDispatch(const HostKey& k, const JobSpec& job) {
  HostOps o;
  const int local_experts = k.local_experts;
  // Fused permute of the tokens and their probabilities.
  o.eager_ops = 2;
  o.backward_kernels = 2;
  switch (k.dispatcher) {
    case Dispatcher::kAllToAll:
      if (k.ep) {
        o.alltoallvs = 2;  // tokens, probabilities
        o.backward_alltoallvs = 2;
        if (local_experts > 1) {  // fused sort of the received chunks by local expert
          o.eager_ops += 2;
          o.backward_kernels += 2;
        }
      }
      if (k.etp) {  // tokens and probabilities all-gathered over ETP; reduce-scattered back
        o.collectives += 2;
        o.backward_collectives += 2;
      }
      break;
    case Dispatcher::kAllGather: break;  // gathered in the preprocessing
    case Dispatcher::kDeepEP:
    case Dispatcher::kHybridEP:
      // The buffer's dispatch (notify and dispatch kernels, launched in
      // C++) after one Python call; the CPU waits for the received-token
      // count unless the shapes are static. Backward: the combine kernels.
      o.eager_ops += 1;
      o.launches = k.dispatcher == Dispatcher::kDeepEP ? 4 : 3;
      o.backward_launches = 3;
      if (rules::DispatchSyncsHost(job, k.dispatcher)) o.syncs = 1;
      break;
  }
  if (k.a2a_overlap) {
    // The EP-overlap schedule's stream hand-offs (events recorded and
    // waited on) around each all-to-all, forward and backward.
    o.launches += 4;
    o.backward_launches += 4;
  }
  return o;
}

HostOps MoeExperts(const HostKey& k) {
  // TEGroupedMLP: two GroupedLinear calls, each one GEMM per local expert
  // launched in TE's C++ loop (on several streams, with their events), and
  // the probability-weighted SwiGLU between them. Backward: dgrad and
  // wgrad per expert for each.
  HostOps o;
  const double local = k.local_experts;
  o.modules = 2;
  o.eager_ops = 2;
  o.views = 2;
  o.launches = 2 * local + 4;
  o.backward_kernels = 2;
  o.backward_launches = 4 * local + 4;
  if (IsFp8(k.precision)) {  // each expert's input split quantized, and its output gradient
    o.launches += 2 * local;
    o.backward_launches += 2 * local;
  }
  if (k.a2a_overlap) o.backward_kernels += 2;  // the delayed weight gradients' callbacks
  return o;
}

HostOps MoeCombine(const HostKey& k) {
  HostOps o;
  const int local_experts = k.local_experts;
  // Fused unpermute (probabilities applied) and the residual add.
  o.eager_ops = 2;
  o.views = 2;
  o.backward_kernels = 2;
  switch (k.dispatcher) {
    case Dispatcher::kAllToAll:
      if (k.ep) {
        o.alltoallvs = 1;
        o.backward_alltoallvs = 1;
        if (local_experts > 1) {
          o.eager_ops += 2;
          o.backward_kernels += 2;
        }
      }
      if (k.etp) {
        o.collectives += 1;
        o.backward_collectives += 1;
      }
      break;
    case Dispatcher::kAllGather:
      if (k.ep_tp) {
        o.collectives = 1;
        o.backward_collectives = 1;
      }
      break;
    case Dispatcher::kDeepEP:
    case Dispatcher::kHybridEP:
      o.eager_ops += 1;
      o.launches = 2;
      o.backward_launches = k.dispatcher == Dispatcher::kDeepEP ? 4 : 3;
      break;
  }
  return o;
}

HostOps SharedExperts(const HostKey& k, const ModelSpec& m) {
  HostOps o;
  if (m.moe->shared_experts == 0) return o;
  // SharedExpertMLP: FC1, SwiGLU, FC2; its gate a GEMM, a sigmoid and a
  // multiply; the routed and shared outputs added.
  o.modules = 2;
  o.eager_ops = 4;
  o.backward_kernels = 5;
  if (m.moe->shared_expert_gate) {
    o.modules += 1;
    o.eager_ops += 3;
    o.backward_kernels += 3;
  }
  AddTp(o, k, 2, 3);
  AddFp8Linears(o, k, 2);
  return o;
}

HostOps Embedding(const HostKey& k) {
  // get_batch's host-to-device copies (tokens, positions / labels), the
  // vocab-parallel lookup and its layout change; with SP its output
  // reduce-scattered over TP.
  HostOps o;
  o.modules = 1;
  o.eager_ops = 5;
  o.views = 2;
  o.backward_kernels = 2;
  AddTp(o, k, 1, 1);
  return o;
}

HostOps OutputLayer(const HostKey& k) {
  // The final norm, the output GEMM, the vocab-parallel cross-entropy (max,
  // exp-sum, target logits, loss) and the loss function's mask, sums and
  // report.
  HostOps o;
  o.modules = 2;
  o.eager_ops = 11;
  o.views = 3;
  o.backward_kernels = 5;
  // The input gathered over TP (SP), and the cross-entropy's three
  // all-reduces; backward reduce-scatters the input gradient.
  if (k.tp) {
    o.collectives = 4;
    o.backward_collectives = 1;
  }
  return o;  // no FP8 casts: the output layer runs in bf16 under FP8
}

HostOps MtpProjection(const HostKey& k) {
  // The two norms, the concat of [hidden; next-token embedding], eh_proj,
  // the next tokens' lookup and shift.
  HostOps o;
  o.modules = 4;
  o.eager_ops = 6;
  o.views = 2;
  o.backward_kernels = 6;
  AddTp(o, k, 1, 1);
  AddFp8Linears(o, k, 1);
  return o;
}

// The CUDA-graph module that captures a part (full_iteration captures
// everything; the layer scope every layer part).
bool Captured(HostPart part, const CudaGraphs& g) {
  switch (g.scope()) {
    case CudaGraphs::Scope::kNone: return false;
    case CudaGraphs::Scope::kFullIteration: return true;
    case CudaGraphs::Scope::kLayer:
      return part != HostPart::kEmbedding && part != HostPart::kOutputLayer && part != HostPart::kMtpProjection;
    case CudaGraphs::Scope::kModules: break;
  }
  switch (part) {
    case HostPart::kAttention: return g.captures(CudaGraphModule::kAttn);
    case HostPart::kDenseMlp: return g.captures(CudaGraphModule::kMlp);
    case HostPart::kMoeRouter: return g.captures(CudaGraphModule::kMoeRouter);
    case HostPart::kMoePreprocess: return g.captures(CudaGraphModule::kMoePreprocess);
    case HostPart::kMoeDispatch:
    case HostPart::kMoeExperts:
    case HostPart::kMoeCombine:
    case HostPart::kSharedExperts: return g.captures(CudaGraphModule::kMoe);
    case HostPart::kEmbedding:
    case HostPart::kOutputLayer:
    case HostPart::kMtpProjection: return false;
  }
  return false;
}

// What a recomputed module issues again in backward, per part: the part's
// whole forward, a piece of it, or nothing; and torch's checkpoint
// bookkeeping (the RNG state saved and restored) once per checkpointed
// region.
constexpr double kCheckpointOps = 2;

HostOps ForwardOf(const HostOps& o) {
  HostOps f;
  f.eager_ops = o.eager_ops;
  f.views = o.views;
  f.modules = o.modules;
  f.launches = o.launches;
  f.collectives = o.collectives;
  f.alltoallvs = o.alltoallvs;
  f.syncs = o.syncs;
  return f;
}

HostOps Piece(double eager_ops, double modules, double views) {
  HostOps p;
  p.eager_ops = eager_ops + kCheckpointOps;
  p.modules = modules;
  p.views = views;
  return p;
}

// The forward work of `part` that `rc` reruns in backward.
HostOps Rerun(HostPart part, const HostOps& row, const HostKey& k, const ModelSpec& m) {
  const Recompute& rc = k.recompute;
  if (rc.none()) return {};
  const bool layer_part = part != HostPart::kEmbedding && part != HostPart::kOutputLayer &&
                          part != HostPart::kMtpProjection;
  if (rc.full()) {
    if (!layer_part) return {};
    HostOps f = ForwardOf(row);
    if (part == HostPart::kAttention) f.eager_ops += kCheckpointOps;  // one region per layer
    return f;
  }
  HostOps out;
  auto add = [&](const HostOps& p) {
    out.eager_ops += p.eager_ops;
    out.views += p.views;
    out.modules += p.modules;
    out.launches += p.launches;
    out.collectives += p.collectives;
    out.alltoallvs += p.alltoallvs;
    out.syncs += p.syncs;
  };
  switch (part) {
    case HostPart::kAttention:
      if (rc.has(RecomputeModule::kCoreAttn)) {
        // The core kernel (ring: every step's kernel and correction).
        add(Piece(1 + 3 * k.ring_steps, 1, 2));
      }
      if (rc.has(RecomputeModule::kLayernorm)) add(Piece(1, 1, 0));  // the input norm
      if (rc.has(RecomputeModule::kMlaUpProj) && m.attention == AttentionKind::kMLA) add(Piece(4, 2, 2));
      break;
    case HostPart::kDenseMlp:
      if (rc.has(RecomputeModule::kMlp)) {
        HostOps f = ForwardOf(row);
        f.eager_ops += kCheckpointOps;
        add(f);
      } else if (rc.has(RecomputeModule::kLayernorm)) {
        add(Piece(1, 1, 0));
      }
      break;
    case HostPart::kMoeRouter:
    case HostPart::kMoePreprocess:
    case HostPart::kMoeDispatch:
    case HostPart::kMoeCombine:
      if (rc.has(RecomputeModule::kMoe)) {
        HostOps f = ForwardOf(row);
        if (part == HostPart::kMoeRouter) f.eager_ops += kCheckpointOps;
        add(f);
      } else if (part == HostPart::kMoeRouter && rc.has(RecomputeModule::kLayernorm)) {
        add(Piece(1, 1, 0));  // the pre-MLP norm
      }
      break;
    case HostPart::kMoeExperts:
      if (rc.has(RecomputeModule::kMoe)) add(ForwardOf(row));
      else if (rc.has(RecomputeModule::kMoeAct)) add(Piece(1, 0, 0));
      break;
    case HostPart::kSharedExperts:
      if (rc.has(RecomputeModule::kMoe) || rc.has(RecomputeModule::kSharedExperts)) {
        HostOps f = ForwardOf(row);
        if (!rc.has(RecomputeModule::kMoe)) f.eager_ops += kCheckpointOps;
        add(f);
      }
      break;
    case HostPart::kEmbedding:
    case HostPart::kOutputLayer:
    case HostPart::kMtpProjection: break;
  }
  return out;
}

double ForwardSeconds(const HostOps& o, const HostSpec& h) {
  const double view_us = std::max(0.0, h.eager_op_us - h.launch_us);  // the op without its launch
  return 1e-6 * (o.eager_ops * h.eager_op_us + o.views * view_us + o.modules * h.module_call_us +
                 o.launches * h.launch_us + o.collectives * h.collective_us + o.alltoallvs * h.alltoallv_us);
}
double ForwardLaunches(const HostOps& o) { return o.eager_ops + o.launches + o.collectives + o.alltoallvs; }
double BackwardSeconds(const HostOps& o, const HostSpec& h) {
  return 1e-6 * (o.backward_kernels * h.backward_kernel_us + o.backward_launches * h.launch_us +
                 o.backward_collectives * h.collective_us + o.backward_alltoallvs * h.alltoallv_us);
}
double BackwardLaunches(const HostOps& o) {
  return o.backward_kernels + o.backward_launches + o.backward_collectives + o.backward_alltoallvs;
}

// Sums parts into a block: eager parts at their cost, each run of
// captured parts one graph replay per pass (their syncs stay: a captured
// region ends where the host must wait).
class BlockSum {
 public:
  BlockSum(const HostKey& k, const CostContext& ctx) : k_(k), ctx_(ctx), h_(ctx.cluster->host) {}
  void Add(HostPart part) {
    const HostOps row = HostOpsOf(part, k_, ctx_);
    const HostOps rerun = Rerun(part, row, k_, *ctx_.model);
    const bool captured = Captured(part, k_.cuda_graphs);
    double forward_s = 0;
    if (captured) {
      if (!in_graph_) {
        forward_s = 1e-6 * h_.graph_replay_us;
        out_.backward.host_s += 1e-6 * h_.graph_replay_us;
        out_.forward.launches += 1;
        out_.backward.launches += 1;
      }
    } else {
      forward_s = ForwardSeconds(row, h_);
      out_.forward.launches += ForwardLaunches(row);
      out_.backward.host_s += BackwardSeconds(row, h_) + ForwardSeconds(rerun, h_);
      out_.backward.launches += BackwardLaunches(row) + ForwardLaunches(rerun);
    }
    out_.forward.host_s += forward_s;
    // A part that syncs issues its launches, then waits.
    if (out_.forward.syncs == 0) out_.forward.before_sync_s += forward_s;
    // A sync ends a captured run: the next captured part is a new graph.
    in_graph_ = captured && row.syncs == 0;
    out_.forward.syncs += row.syncs;
    out_.backward.syncs += rerun.syncs;
    if (out_.backward.syncs == 0) out_.backward.before_sync_s = out_.backward.host_s;
  }
  const HostBlock& block() const { return out_; }

 private:
  const HostKey& k_;
  const CostContext& ctx_;
  const HostSpec& h_;
  HostBlock out_;
  bool in_graph_ = false;
};

void AddLayerParts(BlockSum& sum, bool moe) {
  sum.Add(HostPart::kAttention);
  if (!moe) {
    sum.Add(HostPart::kDenseMlp);
    return;
  }
  for (HostPart p : {HostPart::kMoeRouter, HostPart::kMoePreprocess, HostPart::kMoeDispatch, HostPart::kMoeExperts,
                     HostPart::kMoeCombine, HostPart::kSharedExperts}) {
    sum.Add(p);
  }
}

}  // namespace

const char* Name(HostPart part) {
  switch (part) {
    case HostPart::kAttention: return "attention";
    case HostPart::kDenseMlp: return "dense_mlp";
    case HostPart::kMoeRouter: return "moe_router";
    case HostPart::kMoePreprocess: return "moe_preprocess";
    case HostPart::kMoeDispatch: return "moe_dispatch";
    case HostPart::kMoeExperts: return "moe_experts";
    case HostPart::kMoeCombine: return "moe_combine";
    case HostPart::kSharedExperts: return "shared_experts";
    case HostPart::kEmbedding: return "embedding";
    case HostPart::kOutputLayer: return "output_layer";
    case HostPart::kMtpProjection: return "mtp_projection";
  }
  return "?";
}

HostKey HostKeyOf(const Layout& l, const ModelSpec& model) {
  HostKey k;
  k.tp = l.tp > 1;
  k.tp_cp = l.tp * l.cp > 1;
  k.ep = l.ep > 1;
  k.ep_tp = l.ep * l.tp > 1;
  k.etp = l.etp > 1;
  k.ulysses = l.cp > 1 && l.cp_style == CpStyle::kUlysses;
  k.ring_steps = l.cp > 1 && l.cp_style == CpStyle::kRing ? l.cp - 1 : 0;
  k.local_experts = model.is_moe() ? std::max(1, model.moe->experts / std::max(1, l.ep)) : 1;
  k.recompute = l.recompute;
  k.dispatcher = l.dispatcher;
  k.a2a_overlap = l.a2a_overlap;
  k.precision = l.precision;
  k.tp_overlap = l.tp_overlap;
  k.cuda_graphs = l.cuda_graphs;
  return k;
}

HostOps HostOpsOf(HostPart part, const HostKey& k, const CostContext& ctx) {
  const ModelSpec& m = *ctx.model;
  const bool moe = m.is_moe();
  switch (part) {
    case HostPart::kAttention: return Attention(k, m);
    case HostPart::kDenseMlp: return m.ffn_hidden > 0 ? DenseMlp(k) : HostOps{};
    case HostPart::kMoeRouter: return moe ? MoeRouter(k) : HostOps{};
    case HostPart::kMoePreprocess: return moe ? MoePreprocess(k, *ctx.job) : HostOps{};
    case HostPart::kMoeDispatch: return moe ? MoeDispatch(k, *ctx.job) : HostOps{};
    case HostPart::kMoeExperts: return moe ? MoeExperts(k) : HostOps{};
    case HostPart::kMoeCombine: return moe ? MoeCombine(k) : HostOps{};
    case HostPart::kSharedExperts: return moe ? SharedExperts(k, m) : HostOps{};
    case HostPart::kEmbedding: return Embedding(k);
    case HostPart::kOutputLayer: return OutputLayer(k);
    case HostPart::kMtpProjection: return MtpProjection(k);
  }
  return {};
}

HostWork HostWorkOf(const HostKey& k, const CostContext& ctx) {
  HostWork w;
  const ModelSpec& m = *ctx.model;
  w.sync_s = 1e-6 * ctx.cluster->host.sync_us;
  // clip_grad_norm's total norm and the reported loss, read on the host
  // once per step (full_iteration graphs keep them: they follow the graph).
  w.step_syncs = 2;
  auto block = [&](BlockKind kind, auto add) {
    BlockSum sum(k, ctx);
    add(sum);
    w.block[static_cast<size_t>(kind)] = sum.block();
  };
  // A dense layer's only when the model has one (or an MTP module is one).
  if (!m.is_moe() || m.moe_layer_count() < m.layers || (m.mtp_layers > 0 && !m.mtp_layer_is_moe())) {
    block(BlockKind::kDenseLayer, [&](BlockSum& s) { AddLayerParts(s, false); });
  }
  if (m.is_moe()) block(BlockKind::kMoeLayer, [&](BlockSum& s) { AddLayerParts(s, true); });
  block(BlockKind::kEmbedding, [&](BlockSum& s) { s.Add(HostPart::kEmbedding); });
  block(BlockKind::kOutputLayer, [&](BlockSum& s) { s.Add(HostPart::kOutputLayer); });
  if (m.mtp_layers > 0) {
    block(BlockKind::kMtpLayer, [&](BlockSum& s) {
      s.Add(HostPart::kMtpProjection);
      AddLayerParts(s, m.mtp_layer_is_moe());
      s.Add(HostPart::kOutputLayer);
    });
  }
  return w;
}

}  // namespace foldplan
