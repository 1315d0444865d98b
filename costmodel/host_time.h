// The host's side of a step: what the CPU does to make the GPU run each
// block (doc/cost-model-host.md derives every count and states the step).
//
// Megatron launches every kernel from Python. Per layer part (attention,
// dense MLP, router, dispatch preprocessing, dispatch, experts, combine,
// shared experts, the embedding, the output layer and loss, an MTP
// module's projection) a table counts, forward and backward, the eager
// ops (a PyTorch op with its kernel), view ops (no kernel), nn.Module
// calls, kernels launched in a C++ loop (grouped GEMMs, Transformer
// Engine's FP8 casts, DeepEP), torch.distributed calls and the autograd
// engine's backward kernels, as the recipe runs them: the dispatcher, FP8,
// TP / CP / EP / ETP degrees, TP overlap (userbuffers), FSDP, EP overlap.
// Each costs the cluster's HostSpec figure (inputs/cluster.h, measured).
// Recomputed modules issue their forward again in backward. A CUDA graph
// replaces the eager launches of each run of captured parts by one replay.
// A dropless dispatch waits for the GPU once per MoE layer forward
// (legality.h rules::DispatchSyncsHost): a sync.
//
// The schedule (schedule.h) turns these into time: per block and pass the
// GPU runs while the CPU runs ahead, so the pass takes max(GPU time, host
// time) and each sync adds the GPU time it leaves idle (HostSpec::sync_us).
#pragma once

#include <array>

#include "costmodel/block_kind.h"
#include "costmodel/cost_context.h"
#include "planner/layout.h"

namespace foldplan {

// The parts a table row counts, in a layer's order.
enum class HostPart {
  kAttention,       // input norm, q/k/v (or MLA's) projections, q/k norms, rotary, core, output projection, residual
  kDenseMlp,        // a dense layer's MLP block with its norm and residual
  kMoeRouter,       // the pre-MLP norm, the router GEMM, top-k and the auxiliary loss
  kMoePreprocess,   // the dispatcher's bookkeeping up to its host sync (token counts, split sizes)
  kMoeDispatch,     // permute, the all-to-all (or gather, or flex dispatch), the ETP all-gather, chunk sort
  kMoeExperts,      // the grouped GEMMs and their activation
  kMoeCombine,      // chunk unsort, the ETP reduce-scatter, the all-to-all back, unpermute, residual
  kSharedExperts,   // the shared experts and their gate
  kEmbedding,       // the batch's host-to-device copies and the embedding lookup
  kOutputLayer,     // the final norm, the output GEMM, the cross-entropy and the loss bookkeeping
  kMtpProjection,   // an MTP module's norms, concat, eh_proj and next-token embedding
};
inline constexpr int kHostPartCount = 11;
const char* Name(HostPart part);  // "attention", "dense_mlp", "moe_router", ...

// What the host's counts read of a layout: whether each degree is above 1
// where only that matters, the local experts and ring CP's further steps,
// and the recipe but FSDP (a search memoises HostWorkOf by it: layouts of
// one key issue alike).
struct HostKey {
  bool tp = false;          // tp > 1: sequence-parallel collectives
  bool tp_cp = false;       // tp x cp > 1: the auxiliary loss's counts summed
  bool ep = false;          // ep > 1: all-to-alls
  bool ep_tp = false;       // ep x tp > 1: the dispatch preprocessing's gathers
  bool etp = false;         // etp > 1: ETP gathers and reduce-scatters
  bool ulysses = false;     // Ulysses CP over cp > 1
  int ring_steps = 0;       // ring CP: cp - 1 further steps, else 0
  int local_experts = 1;    // experts / ep (1 for a dense model)
  Recompute recompute;
  Dispatcher dispatcher = Dispatcher::kAllToAll;
  bool a2a_overlap = false;
  Precision precision = Precision::kBF16;
  bool tp_overlap = false;
  CudaGraphs cuda_graphs;
  bool operator==(const HostKey&) const = default;
};
HostKey HostKeyOf(const Layout& layout, const ModelSpec& model);

// What one part issues per micro-batch, forward and backward (recomputation
// not included). Counts, not seconds.
struct HostOps {
  // Forward.
  double eager_ops = 0;    // PyTorch ops issued from Python, one kernel each
  double views = 0;        // PyTorch ops without a kernel (reshape, split, slicing)
  double modules = 0;      // nn.Module calls
  double launches = 0;     // kernels launched in a C++ loop
  double collectives = 0;  // torch.distributed calls (all-gather, reduce-scatter, all-reduce, p2p batch)
  double alltoallvs = 0;   // all_to_all_single calls (split sizes or equal chunks)
  double syncs = 0;        // host waits for the GPU
  // Backward.
  double backward_kernels = 0;      // issued by the autograd engine
  double backward_launches = 0;     // launched in a C++ loop
  double backward_collectives = 0;
  double backward_alltoallvs = 0;
};
// The table row of `part` for the layout's recipe; zero for parts the
// model's layers do not have (shared experts of a model without them).
// Needs ctx.model and ctx.job.
HostOps HostOpsOf(HostPart part, const HostKey& key, const CostContext& ctx);

// One pass of one block, per micro-batch.
struct HostPass {
  double host_s = 0;    // CPU time issuing it
  // Of host_s, what is issued before the pass's first sync (all of it
  // when it has none): a forward MoE layer's attention, router and
  // dispatch preprocessing (with DeepEP, its dispatch's launches too).
  double before_sync_s = 0;
  double launches = 0;  // launches from the host (a graph replay is one)
  double syncs = 0;     // host waits for the GPU
};
struct HostBlock {
  HostPass forward;
  HostPass backward;  // with the recomputation it runs
};
// The host side of a layout's step.
struct HostWork {
  std::array<HostBlock, kBlockKindCount> block;  // indexed by BlockKind
  double sync_s = 0;  // GPU time each sync leaves idle
  // Per step, outside the pipeline: the optimizer's gradient-norm read and
  // the loss report (one .item() each).
  double step_syncs = 0;
  const HostBlock& of(BlockKind kind) const { return block[static_cast<size_t>(kind)]; }
};
// Needs ctx.cluster, ctx.model and ctx.job. No allocation.
HostWork HostWorkOf(const HostKey& key, const CostContext& ctx);
inline HostWork HostWorkOf(const Layout& layout, const CostContext& ctx) {
  return HostWorkOf(HostKeyOf(layout, *ctx.model), ctx);
}

}  // namespace foldplan
