// Memory per rank: see memory.h for the interface and
// doc/cost-model-memory.md for every formula's derivation. Comments here
// say which tensor a number stands for; the doc says why it is kept.
#include "costmodel/memory.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <limits>
#include <numeric>
#include <type_traits>

#include "core/mix64.h"
#include "costmodel/compute_time.h"
#include "costmodel/dtype_bytes.h"
#include "costmodel/memory_terms.h"
#include "costmodel/routing.h"
#include "costmodel/schedule.h"

namespace foldplan {
namespace {

// kBf16Bytes (weights, activations) and kFp32Bytes (softmax statistics,
// router scores, loss logits, probabilities): costmodel/dtype_bytes.h.
constexpr double kMask = 1;        // bytes: a dropout mask element
constexpr double kBool = 1;        // bytes: a routing-map element (torch.bool)
constexpr double kIndex = 8;       // bytes: an int64 token or position id, a top-k index
constexpr double kAdamBytes = 12;  // fp32 master weight + Adam m + Adam v

// Bytes per element of the input an FP8 linear saves for its weight
// gradient, scales included. Transformer Engine keeps one usage of it: the
// columnwise (transposed) copy on Hopper, which wgrad reads; MXFP8 the
// columnwise copy (its 32-element blocks run along the token axis wgrad
// reduces over). delayed / tensorwise: one fp32 scale per tensor, nothing
// per element; blockwise: an fp32 scale per 1 x 128 block, 4 / 128;
// mxfp8: an E8M0 scale per 32 elements, 1 / 32.
double Fp8ActivationBytes(Precision p) {
  switch (p) {
    case Precision::kFP8Delayed:
    case Precision::kFP8Tensorwise:
      return kFp8Bytes;
    case Precision::kFP8Blockwise:
      return kFp8Bytes + kFp8BlockScaleBytesPerElement;
    case Precision::kMXFP8:
      return kFp8Bytes + kMxfp8ScaleBytesPerElement;
    case Precision::kBF16:
      break;
  }
  return kBf16Bytes;
}

// Bytes per GEMM weight element of the FP8 copies Transformer Engine caches
// across the micro-batches of a step (is_first_microbatch), beside the bf16
// weight: a rowwise copy (fprop) and a columnwise one (dgrad reads W^T).
// delayed / tensorwise: Hopper's FP8 GEMMs take only the TN layout, so
// weight + transpose, 1 + 1; Blackwell's take any layout, so one copy.
// blockwise (128 x 128 blocks, fp32 scales): 2 x (1 + 4 / 128^2).
// mxfp8: both copies, each quantized along its own axis with an E8M0 scale
// per 32 elements, 2 x (1 + 1/32).
double Fp8WeightCopyBytes(Precision p, bool blackwell) {
  switch (p) {
    case Precision::kFP8Delayed:
    case Precision::kFP8Tensorwise:
      return blackwell ? kFp8Bytes : 2 * kFp8Bytes;
    case Precision::kFP8Blockwise:
      return 2 * (kFp8Bytes + kFp8WeightBlockScaleBytesPerElement);
    case Precision::kMXFP8:
      return 2 * (kFp8Bytes + kMxfp8ScaleBytesPerElement);
    case Precision::kBF16:
      break;
  }
  return 0;
}

// Scaling state per FP8 GEMM that lives apart from the data (TE fp8_meta):
// five scaled tensors (forward input, weight, output; backward output
// gradient, input gradient). delayed: an amax history of `history` fp32 +
// scale + scale_inv each; tensorwise: scale + amax each. Block scales
// (blockwise, mxfp8) travel with their tensors and are counted there.
constexpr int kFp8ScaledTensorsPerGemm = 5;
double Fp8StatePerGemm(Precision p, int history) {
  switch (p) {
    case Precision::kFP8Delayed:
      return kFp8ScaledTensorsPerGemm * (std::max(1, history) + 2) * kFp32Bytes;
    case Precision::kFP8Tensorwise:
      return kFp8ScaledTensorsPerGemm * 2 * kFp32Bytes;
    default:
      return 0;
  }
}

// DeepEP's preallocated buffers (deep_ep csrc/config.hpp
// get_nvl_buffer_size_hint / get_rdma_buffer_size_hint; Megatron's
// fused_a2a.get_buffer sizes them for hidden_bytes = H x 2, the larger of
// the dispatch and combine configs of deep_ep/buffer.py).
constexpr int kDeepEpMaxNvlPeers = 8;               // NUM_MAX_NVL_PEERS
constexpr double kDeepEpRdmaRecvTokens = 128;       // num_max_rdma_chunked_recv_tokens, every size
constexpr double kDeepEpTokenMetaBytes =            // per buffered token besides its hidden bytes:
    8                                               //   SourceMeta (internode)
    + 128 * kIndex                                  //   kNumMaxTopK int64 top-k indices
    + 128 * kFp32Bytes                                   //   kNumMaxTopK fp32 top-k weights
    + 128 * kFp32Bytes;                                  //   kNumMaxScales fp32 scales
// num_max_nvl_chunked_recv_tokens of the dispatch / combine configs by EP
// group size (the larger of the two; both agree): 256 up to 8 ranks, 288
// for 16-64, 560 for 128, 720 for 144-160 (and beyond, the last entry).
double DeepEpNvlRecvTokens(int ranks) {
  if (ranks <= 8) return 256;
  if (ranks <= 64) return 288;
  if (ranks <= 128) return 560;
  return 720;
}

enum TermIndex {
  kParametersIdx,
  kFp8WeightCopiesIdx,
  kFp8ScalingStateIdx,
  kGradientsIdx,
  kOptimizerStatesIdx,
  kFsdpGatheredIdx,
  kFsdpGradientsIdx,
  kActivationsIdx,
  kRecomputeWorkingSetIdx,
  kMtpActivationsIdx,
  kEmbeddingActivationsIdx,
  kOutputLogitsIdx,
  kMtpLogitsIdx,
  kDispatchBuffersIdx,
  kEpOverlapIdx,
  kFlexBuffersIdx,
  kNcclBuffersIdx,
  kOptimizerBucketsIdx,
  kCudaContextIdx,
  kFragmentationIdx,
};

constexpr const char* kTermNames[kMemoryTermCount] = {
    memory_term::kParameters,          memory_term::kFp8WeightCopies,
    memory_term::kFp8ScalingState,     memory_term::kGradients,
    memory_term::kOptimizerStates,     memory_term::kFsdpGatheredParameters,
    memory_term::kFsdpUnshardedGradients, memory_term::kActivations,
    memory_term::kRecomputeWorkingSet, memory_term::kMtpActivations,
    memory_term::kEmbeddingActivations, memory_term::kOutputLogits,
    memory_term::kMtpLogits,           memory_term::kDispatchBuffers,
    memory_term::kEpOverlap,           memory_term::kFlexDispatcherBuffers,
    memory_term::kNcclBuffers,         memory_term::kOptimizerBuckets,
    memory_term::kCudaContext,         memory_term::kFragmentation,
};

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[400];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

double GiB(double bytes) { return bytes / kBytesPerGiB; }

// The largest `n` (1..4) FSDP units of a stage: parameter elements and the
// GEMM weights among them.
struct LargestUnits {
  static constexpr int kMax = 4;
  int n = 2;
  std::array<double, kMax> params{}, gemm{};
  void Add(double unit_params, double unit_gemm, int count) {
    for (int c = 0; c < std::min(count, n); ++c) {
      int at = n;
      while (at > 0 && unit_params > params[static_cast<size_t>(at - 1)]) --at;
      if (at >= n) return;
      for (int i = n - 1; i > at; --i) {
        params[static_cast<size_t>(i)] = params[static_cast<size_t>(i - 1)];
        gemm[static_cast<size_t>(i)] = gemm[static_cast<size_t>(i - 1)];
      }
      params[static_cast<size_t>(at)] = unit_params;
      gemm[static_cast<size_t>(at)] = unit_gemm;
    }
  }
  double Params(int k) const {
    double s = 0;
    for (int i = 0; i < std::min(k, n); ++i) s += params[static_cast<size_t>(i)];
    return s;
  }
  double Gemm() const {
    double s = 0;
    for (int i = 0; i < n; ++i) s += gemm[static_cast<size_t>(i)];
    return s;
  }
};

std::atomic<uint64_t> next_model_id{1};  // MemoryModel::id_

}  // namespace

double MemoryBreakdown::bytes_of(std::string_view name) const {
  for (const MemoryTerm& t : terms) {
    if (name == t.name) return t.bytes;
  }
  return 0;
}

MemoryModel::MemoryModel(const ModelSpec& model, const JobSpec& job, const ClusterSpec& cluster,
                         const MemoryAssumptions& assumptions)
    : id_(next_model_id.fetch_add(1, std::memory_order_relaxed)),
      model_(model),
      job_(job),
      hbm_gib_(cluster.gpu.hbm_gib),
      blackwell_(cluster.gpu.architecture == GpuArchitecture::kBlackwell),
      nvlink_domain_gpus_(std::max(1, cluster.nvlink_domain_gpus)),
      a_(assumptions),
      params_(model) {
  const ModelSpec& m = model;

  // Activation widths per token row (doc section "Activations").
  mla_ = m.attention == AttentionKind::kMLA && m.mla.has_value();
  q_ = double(m.heads) * m.head_dim;
  k_ = double(m.kv_heads) * m.head_dim;
  v_ = double(m.kv_heads) * m.v_head_dim();
  o_ = double(m.heads) * m.v_head_dim();
  qk_norm_inputs_ = m.qk_norm ? q_ + k_ : 0;
  if (mla_) latents_ = double(m.mla->kv_lora_rank) + double(m.mla->q_lora_rank);
  // SwiGLU's fc1 output is gate and up (2F), GELU's F; fc2 reads F.
  const bool swiglu = m.activation == Activation::kSwiGLU;
  auto fc1_out = [&](double width) { return swiglu ? 2 * width : width; };
  mlp_fc1_out_ = fc1_out(m.ffn_hidden);
  mlp_fc2_in_ = m.ffn_hidden;
  // FP8 GEMMs per layer: GQA/MHA linear_qkv + linear_proj; MLA q (or
  // q_down + q_up), kv_down, kv_up, proj; MLP fc1 + fc2.
  attention_gemms_ = mla_ ? (m.mla->q_lora_rank > 0 ? 2 : 1) + 3 : 2;
  dense_mlp_gemms_ = 2;
  if (m.is_moe()) {
    const MoeSpec& e = *m.moe;
    const double shared_width = double(e.shared_experts) * e.shared_ffn_hidden;
    shared_fc1_out_ = fc1_out(shared_width);
    shared_fc2_in_ = shared_width;
    expert_fc1_out_ = fc1_out(e.ffn_hidden);
    expert_fc2_in_ = e.ffn_hidden;
    shared_gemms_ = shared_width > 0 ? 2 : 0;
  }
}

MemoryModel::MemoryModel(const CostContext& ctx, const MemoryAssumptions& assumptions)
    : MemoryModel(*ctx.model, *ctx.job, *ctx.cluster, assumptions) {}

double MemoryModel::ExpertLoad(const Layout& layout) const { return ExpertLoadFactor(job_, layout.ep); }

MemoryModel::LayerBytes MemoryModel::Layer(const Layout& layout, bool moe_layer,
                                           Recompute r) const {
  const ModelSpec& m = model_;
  const double h = m.hidden;
  const double tp = std::max(1, layout.tp);
  const double cp = std::max(1, layout.cp);
  const double seq = job_.seq_len;
  const double mbs = std::max(1, layout.mbs);
  // Token rows per rank: the sequence split over CP, and (sequence
  // parallelism) the non-matmul tensors over TP; TP-split matmul outputs
  // have all mbs S / cp rows but 1/tp of the width, the same element count.
  const double rows = mbs * seq / (cp * tp);
  LayerBytes out;
  if (r.full()) {
    out.stored = kBf16Bytes * rows * h;  // the layer input only
    out.rebuilt = Layer(layout, moe_layer, Recompute::None()).stored;
    return out;
  }
  auto has = [&](RecomputeModule x) { return r.has(x); };
  const bool fp8 = IsFp8(layout.precision);
  // A tensor an FP8 linear saves as its input: FP8 (+ scales), else bf16.
  const double lin = fp8 ? Fp8ActivationBytes(layout.precision) : kBf16Bytes;
  const double mask = a_.dropout ? kMask * h : 0;

  // Attention sub-layer. The core: flash keeps fp32 log-sum-exp per head
  // and query row; unfused attention its a x s x s scores (Ulysses: heads /
  // (tp cp) over all S; ring: heads / tp over S / cp queries, S keys;
  // either way mbs a S^2 / (tp cp)), 2 B, or 5 B with dropout (softmax
  // output, mask, dropout output).
  const double core = a_.flash_attention
                          ? rows * kFp32Bytes * m.heads
                          : mbs * m.heads * seq * seq / (tp * cp) *
                                (a_.dropout ? kBf16Bytes + kMask + kBf16Bytes : kBf16Bytes);
  const bool separate_input_norm = mla_ || !a_.norms_fused_into_linear;
  const bool drop_input_norm = separate_input_norm && has(RecomputeModule::kLayernorm);
  const bool drop_up_proj = mla_ && has(RecomputeModule::kMlaUpProj);
  const bool drop_core = has(RecomputeModule::kCoreAttn);
  double attn_row = kBf16Bytes * h;  // the input norm's input: the layer input
  // Its output, the QKV (MLA: q and kv down-projection) input: FP8 linears
  // keep their own FP8 copies, one per linear reading it (MLA: two).
  if (!drop_input_norm) attn_row += (fp8 && mla_ ? 2 : 1) * lin * h;
  attn_row += kBf16Bytes * latents_;  // MLA latent norms' inputs
  if (!drop_up_proj) attn_row += lin * latents_ + kBf16Bytes * (q_ + k_ + v_);  // up-proj inputs; q, k, v
  attn_row += kBf16Bytes * qk_norm_inputs_;
  // The attention output: the core's backward keeps it (bf16) unless the
  // core is recomputed; the out-projection keeps it too, the same tensor in
  // bf16, its own FP8 copy under FP8.
  attn_row += (fp8 ? (drop_core ? 0 : kBf16Bytes) + lin : kBf16Bytes) * o_;
  attn_row += mask;  // after the out-projection
  const double attn = rows * attn_row + (drop_core ? 0 : core);
  // What attention's backward rebuilds: the input norm's output, the MLA
  // up-projection block (latent norm outputs, q, k, v), the core (its
  // output and statistics); all alive during the core's backward.
  const double attn_rebuilt =
      rows * ((drop_input_norm ? kBf16Bytes * h : 0) +
              (drop_up_proj ? lin * latents_ + kBf16Bytes * (q_ + k_ + v_) : 0) +
              (drop_core ? kBf16Bytes * o_ : 0)) +
      (drop_core ? core : 0);

  if (!moe_layer || !m.moe) {
    // Dense MLP: pre-MLP norm input, its output (fc1's input), fc1's
    // output (the activation's input), the activation's output (fc2's input).
    const bool separate = !a_.norms_fused_into_linear;
    const bool drop_norm = separate && has(RecomputeModule::kLayernorm);
    const bool drop_mlp = has(RecomputeModule::kMlp);
    double row = kBf16Bytes * h + mask;
    if (drop_mlp) {
      if (separate && !drop_norm) row += kBf16Bytes * h;  // the MLP checkpoint's input
    } else {
      if (!drop_norm) row += lin * h;
      row += kBf16Bytes * mlp_fc1_out_ + lin * mlp_fc2_in_;
    }
    const double rebuilt =
        (drop_norm ? kBf16Bytes * h : 0) +
        (drop_mlp ? kBf16Bytes * mlp_fc1_out_ + lin * mlp_fc2_in_ + (separate ? 0 : lin * h) : 0);
    out.stored = attn + rows * row;
    out.rebuilt = std::max(attn_rebuilt, rows * rebuilt);
    return out;
  }

  // MoE sub-layer. Expert rows on the busiest rank: the ETP all-gather
  // collects etp ranks' dispatched rows, T K each on average, `load` times
  // that on the busiest.
  const MoeSpec& e = *m.moe;
  const double etp = std::max(1, layout.etp);
  const double expert_rows = etp * ExpertLoad(layout) * rows * e.top_k;
  const bool drop_norm = has(RecomputeModule::kLayernorm);  // a separate TENorm
  const bool drop_moe = has(RecomputeModule::kMoe);
  const bool shared = shared_fc2_in_ > 0;
  const bool drop_shared = shared && has(RecomputeModule::kSharedExperts);
  const bool drop_act = has(RecomputeModule::kMoeAct);
  // Router: fp32 scores (softmax / sigmoid output), the aux-loss scores;
  // fused (TE fused_topk_with_score_function) + the bool routing map;
  // unfused + the top-k probabilities (fp32) and indices (int64).
  const double router_row =
      kFp32Bytes * e.experts * (a_.router_aux_loss ? 2 : 1) +
      (job_.moe_router_fusion ? kBool * e.experts
                               : kFp32Bytes * e.top_k + kIndex * e.top_k + kBool * e.experts);
  const double shared_row = shared ? kBf16Bytes * shared_fc1_out_ + lin * shared_fc2_in_ : 0;
  // Under FP8 the shared experts' fc1 keeps its own FP8 copy of the norm
  // output beside the router's bf16 one.
  const double shared_copy = shared && fp8 ? lin * h : 0;
  const double combine_row = a_.expert_probs_in_activation ? 0 : kBf16Bytes * e.top_k * h;
  const double prob = a_.expert_probs_in_activation ? kFp32Bytes : 0;  // permuted prob, per row
  const double fc2_in = expert_fc2_in_ / etp;
  const double expert_row = lin * h + kBf16Bytes * expert_fc1_out_ / etp + prob + lin * fc2_in;
  const double block =
      rows * (router_row + shared_row + shared_copy + combine_row) + expert_rows * expert_row;

  double row = kBf16Bytes * h + mask;     // pre-MLP norm input; dropout mask after the MoE
  if (!drop_norm) row += kBf16Bytes * h;  // its output: the router's input, or moe's checkpoint input
  double stored_block = 0;
  if (!drop_moe) {
    stored_block = rows * (router_row + combine_row) +
                   (drop_shared ? 0 : rows * (shared_row + (drop_norm ? 0 : shared_copy))) +
                   expert_rows * (expert_row - (drop_act ? lin * fc2_in : 0));
  }
  // What the MoE's backward rebuilds: the norm output (alive through the
  // whole MoE backward) plus the MoE block (moe) or the larger of the
  // experts' activation output (moe_act, bf16) and the shared experts
  // (shared_experts), which are rebuilt one after the other.
  const double moe_rebuilt =
      (drop_norm ? rows * kBf16Bytes * h : 0) +
      (drop_moe ? block
                : std::max(drop_act ? expert_rows * kBf16Bytes * fc2_in : 0,
                           drop_shared ? rows * (shared_row + shared_copy) : 0));
  out.stored = attn + rows * row + stored_block;
  out.rebuilt = std::max(attn_rebuilt, moe_rebuilt);
  out.routed = drop_moe ? 0 : expert_rows * (expert_row - (drop_act ? lin * fc2_in : 0));
  return out;
}

MemoryModel::ReceivedRowBytes MemoryModel::BytesOfReceivedRows(const Layout& layout) const {
  ReceivedRowBytes out;
  if (!model_.moe) return out;
  out.activations_per_moe_layer = Layer(layout, true, layout.recompute).routed;
  const FamilyTerms l = ComputeFamily(layout, DescribePipeline(layout, model_));
  const DispatchTerms d = ComputeDispatch(layout, l);
  out.dispatch = d.dispatch_received;
  return out;
}

double MemoryModel::LayerActivationBytes(const Layout& layout, bool moe_layer,
                                         Recompute recompute) const {
  return Layer(layout, moe_layer, recompute).stored;
}

double MemoryModel::LayerRecomputeBytes(const Layout& layout, bool moe_layer,
                                        Recompute recompute) const {
  return Layer(layout, moe_layer, recompute).rebuilt;
}

StageParams MemoryModel::ParamsOnStage(const Layout& layout, int stage) const {
  return ParamsOnStage(layout, DescribePipeline(layout, model_), stage);
}

StageParams MemoryModel::ParamsOnStage(const Layout& layout, const PipelineDescription& pipeline,
                                       int stage) const {
  if (stage < 0 || stage >= static_cast<int>(pipeline.ranks.size())) return StageParams{};
  return params_.OnRank(layout, pipeline.ranks[static_cast<size_t>(stage)]);
}

MemoryModel::FamilyTerms MemoryModel::ComputeFamily(const Layout& layout,
                                                    const PipelineDescription& pipeline) const {
  const ModelSpec& m = model_;
  const JobSpec& job = job_;
  const double h = m.hidden;
  const double tp = std::max(1, layout.tp);
  const double cp = std::max(1, layout.cp);
  const double ep = std::max(1, layout.ep);
  const double etp = std::max(1, layout.etp);
  const double mbs = std::max(1, layout.mbs);
  const double seq = job.seq_len;
  const bool moe_model = m.moe.has_value();

  FamilyTerms l;
  l.microbatches = MicroBatchesPerStep(job, layout);
  l.rows = mbs * seq / (cp * tp);
  l.load = ExpertLoad(layout);
  if (moe_model) {
    l.expert_rows = etp * l.load * l.rows * m.moe->top_k;
    l.local_experts = m.moe->experts / ep;
  }

  // Embedding: int64 token and position ids of a micro-batch (each rank of a
  // CP group reads its S / cp positions), + the embedding's dropout mask.
  l.embedding_per_microbatch =
      2 * kIndex * mbs * seq / cp + (a_.dropout ? kMask * l.rows * h : 0);
  // Output: the loss keeps fp32 vocab-parallel logits of one micro-batch
  // (the last stage runs each micro-batch's backward right after its last
  // forward), plus the final norm's and output layer's inputs.
  l.mtp_logits = kFp32Bytes * mbs * seq / cp * double(m.vocab) / tp;
  l.logits = l.mtp_logits + 2 * kBf16Bytes * l.rows * h;
  for (const VirtualStage& s : pipeline.stages) {
    if (s.mtp_layers > 0 && !s.loss) l.mtp_with_loss = false;
    if (s.mtp_layers > 0 && s.pipeline_rank != 0) l.mtp_off_first = true;
  }

  if (moe_model) {
    // EP overlap with --delay-wgrad-compute: the experts' (and shared
    // experts') weight-gradient GEMMs of one MoE layer run later, so their
    // output gradients (bf16) outlive the data gradients: fc2's R x H and
    // fc1's R x fc1-width / etp; shared: fc2's gathered mbs S / cp x H =
    // tp T H and fc1's T x fc1-width.
    l.deferred_wgrad = kBf16Bytes * (l.expert_rows * (h + expert_fc1_out_ / etp) +
                                (shared_fc2_in_ > 0 ? l.rows * (tp * h + shared_fc1_out_) : 0));
    // The flex dispatcher's group (Megatron's tp_ep_group: etp x ep ranks).
    l.flex_ranks = static_cast<int>(etp * ep);
  }

  // FSDP units per rank: a decoder layer of each kind, an MTP layer, the
  // vocab-parallel table (embedding, output layer or a copy).
  l.dense_unit = params_.DenseLayer(layout.tp);
  l.dense_unit_gemm = params_.dense_layer_tp / tp + params_.layer_gemm_replicated;
  if (moe_model) {
    const double experts = params_.Experts(layout.ep, layout.etp);
    l.moe_unit = params_.MoeLayer(layout.tp) + experts;
    l.moe_unit_gemm = params_.moe_layer_tp / tp + params_.layer_gemm_replicated + experts;
  }
  l.mtp_unit = (params_.mtp_moe ? l.moe_unit : l.dense_unit) + params_.mtp_projection / tp + params_.mtp_norms;
  l.mtp_unit_gemm = (params_.mtp_moe ? l.moe_unit_gemm : l.dense_unit_gemm) + params_.mtp_projection / tp;
  l.table_unit = double(params_.embeddings.input_embedding) / tp;

  // NCCL communicators every stage uses (created lazily, so only those used);
  // the MoE ones only on stages with MoE layers, the pipeline and embedding
  // ones per stage (ShapeStage), the all-to-all's per dispatcher (ComputeDispatch).
  auto groups = [](double size) { return size > 1 ? 1 : 0; };
  l.collectives = groups(tp)                                        // sequence-parallel AG / RS
                  + groups(double(std::max(1, layout.dp)) * cp);    // dense gradients
  l.moe_collectives = groups(etp)                                   // expert-TP AG / RS
                      + groups(std::max(1, layout.edp))             // expert gradients
                      + groups(tp * ep);  // token counts, the all-gather, the flex buffer's setup
  if (cp > 1) {
    l.p2p_peers = layout.cp_style == CpStyle::kUlysses ? int(cp) - 1 : std::min(2, int(cp) - 1);
  }
  return l;
}

MemoryModel::LayerTerms MemoryModel::ComputeLayers(const Layout& layout) const {
  LayerTerms y;
  y.dense = Layer(layout, false, layout.recompute);
  if (model_.moe) y.moe = Layer(layout, true, layout.recompute);
  return y;
}

MemoryModel::DispatchTerms MemoryModel::ComputeDispatch(const Layout& layout, const FamilyTerms& l) const {
  const ModelSpec& m = model_;
  const JobSpec& job = job_;
  const double h = m.hidden;
  const double ep = std::max(1, layout.ep);
  const double etp = std::max(1, layout.etp);
  const bool moe_model = m.moe.has_value();
  const bool fp8 = IsFp8(layout.precision);
  const double lin = fp8 ? Fp8ActivationBytes(layout.precision) : kBf16Bytes;

  DispatchTerms o;
  // An MTP module's own tensors per row: enorm's input (the next tokens'
  // embedding), eh_proj's input [hnorm(h); enorm(e)] (2H, an FP8 linear's
  // input under FP8), its final norm's input and the output head's input.
  // hnorm's input is the decoder's output, kept by the main final norm on
  // the loss stage (else counted in ComputeStage).
  o.mtp_row = kBf16Bytes * h + lin * 2 * h + kBf16Bytes * h + kBf16Bytes * h;

  // One MoE layer's transient dispatch / combine buffers (backward mirrors them).
  if (moe_model) {
    const double k = m.moe->top_k;
    const double row = kBf16Bytes * h;
    switch (layout.dispatcher) {
      case Dispatcher::kAllToAll:
        o.dispatch = l.rows * k * row;                               // permuted send buffer
        if (ep > 1) o.dispatch += l.load * l.rows * k * row;         // all-to-all receive
        if (etp > 1) o.dispatch += etp * l.load * l.rows * k * row;  // ETP gather, unsorted
        o.dispatch_received = o.dispatch - l.rows * k * row;
        break;
      case Dispatcher::kAllGather:
        o.dispatch = etp * ep * l.rows * row;  // hidden states gathered over the TP-EP group
        break;
      case Dispatcher::kDeepEP:
      case Dispatcher::kHybridEP: {
        // Each token goes once to each distinct destination rank, about
        // D = ep (1 - (1 - 1/ep)^K) of them (ApproxDistinctRanks, which
        // undercounts the exact expectation slightly). The kernel reads the
        // tokens in place. Dispatch: the received tokens, load T D, in FP8
        // under an FP8 recipe (+ the permuted rows before the ETP gather).
        // Combine (bf16): the experts' fc2 output, R rows, + the rows
        // summed per token, load T D (+ the ETP reduce-scatter output).
        o.destinations = ApproxDistinctRanks(ep, k);
        const double recv_bytes = fp8 ? Fp8DispatchBytesPerElement(layout.precision) * h : row;
        const double before_etp = etp > 1 ? l.load * l.rows * k * row : 0;
        const double dispatch = l.load * l.rows * o.destinations * recv_bytes + before_etp;
        const double combine =
            l.expert_rows * row + before_etp + l.load * l.rows * o.destinations * row;
        o.dispatch = std::max(dispatch, combine);
        o.dispatch_received = o.dispatch;  // every term grows with the load
        break;
      }
    }

    // Flex dispatcher's persistent buffers, over its TP x EP group
    // (Megatron's tp_ep_group: etp x ep ranks).
    const int ranks = static_cast<int>(etp * ep);
    if (layout.dispatcher == Dispatcher::kDeepEP) {
      const double channels = std::max(1, job.deepep_sms) / 2;  // two SMs per channel
      const double nvl_peers = std::min(ranks, kDeepEpMaxNvlPeers);
      const double rdma_peers = std::max(ranks / kDeepEpMaxNvlPeers, 1);
      const double token = row + kDeepEpTokenMetaBytes;  // hidden_bytes = H x 2, bf16 either way
      o.flex_peers = nvl_peers;
      o.flex_nvl = channels * nvl_peers *
                   ((2 * rdma_peers + 3) * 4 + DeepEpNvlRecvTokens(ranks) * token);
      if (ranks > kDeepEpMaxNvlPeers) {
        // Send and receive halves per RDMA peer (the same rail's GPU of each node).
        o.flex_rdma = channels * rdma_peers *
                      ((2 * kDeepEpMaxNvlPeers + 2) * 2 * 4 + kDeepEpRdmaRecvTokens * token * 2);
      }
    } else if (layout.dispatcher == Dispatcher::kHybridEP) {
      // HybridEP (Megatron's init_hybrid_ep_buffer passes
      // max_num_of_tokens_per_rank): buffers registered for NVLink sized
      // for the worst case, every token of every NVLink peer in the group:
      // a dispatch buffer (FP8 under an FP8 recipe) and a bf16 combine buffer.
      const double peers = std::min(ranks, nvlink_domain_gpus_);
      o.flex_peers = peers;
      o.flex_nvl =
          l.rows * peers * h * ((fp8 ? Fp8DispatchBytesPerElement(layout.precision) : kBf16Bytes) + kBf16Bytes);
    }
  }

  // FP8 weight copies and scaling state.
  o.fp8 = fp8;
  if (fp8) {
    o.fp8_weight_bytes = Fp8WeightCopyBytes(layout.precision, blackwell_);
    o.fp8_state_per_gemm = Fp8StatePerGemm(layout.precision, a_.fp8_amax_history_len);
  }

  // NCCL all-to-all only for the alltoall dispatcher: the flex kernels move
  // tokens through their own NVLink / RDMA buffers.
  if (ep > 1 && layout.dispatcher == Dispatcher::kAllToAll) o.moe_p2p_peers = int(ep) - 1;
  return o;
}

MemoryModel::StageShape MemoryModel::ShapeStage(const Layout& layout, const FamilyTerms& l, int stage,
                                                const PipelineRank& held, bool fsdp) const {
  const ModelSpec& m = model_;
  const JobSpec& job = job_;
  const int pp = std::max(1, layout.pp);
  const bool first = held.embedding;
  const bool last = held.loss;
  const int mtp = held.mtp_layers;
  const bool mtp_moe = mtp > 0 && params_.mtp_moe && m.moe;
  const bool has_moe = (held.moe_layers > 0 || mtp_moe) && m.moe;

  StageShape s;
  s.Place(PlaceStage(layout, l, stage));
  s.held = held;

  // Parameters, gradients, optimizer states.
  s.params = params_.OnRank(layout, held);
  const int dense_group = std::max(1, layout.dp) * std::max(1, layout.cp);  // dense grads: dp x cp
  const int expert_group = std::max(1, layout.edp);                        // expert grads: edp
  const double params = s.params.total();
  s.sharded = s.params.dense / dense_group + s.params.expert / expert_group;
  StageShape::ParamTerms& plain = s.by_fsdp[0];
  plain.parameters = kBf16Bytes * params;
  plain.gradients = a_.grad_bytes * params;
  plain.optimizer_states = job.distributed_optimizer ? kAdamBytes * s.sharded : kAdamBytes * params;
  plain.fp8_gemm = s.params.gemm;
  if (fsdp) ShapeFsdp(l, &s);

  // FP8 GEMMs (scaling state).
  const double attn = attention_gemms_;
  const double moe_gemms = attn + shared_gemms_ + 2 * l.local_experts;
  const double dense_gemms = attn + dense_mlp_gemms_;
  const double dense_layers = held.dense_layers();
  s.gemms = dense_layers * dense_gemms + held.moe_layers * moe_gemms +
            mtp * ((params_.mtp_moe ? moe_gemms : dense_gemms) + 1);  // + eh_proj


  // The tie group joins the embedding's rank and the loss's; none when one
  // rank holds both (pp 1, or DualPipeV's V).
  const bool tied_group = m.tied_embeddings && first != last;
  // The embedding group between the first stage and an MTP stage
  // (synchronising the MTP's embedding copy), unless the tie group is it.
  const bool mtp_group =
      pp > 1 && !tied_group && ((mtp > 0 && !first) || (first && l.mtp_off_first));
  s.collectives = l.collectives + (has_moe ? l.moe_collectives : 0) + (tied_group ? 1 : 0) +
                  (mtp_group ? 1 : 0);

  // Distributed optimizer: reduce-scatter and all-gather run in place on
  // bucket views of the gradient and parameter buffers; only each bucket's
  // padding to a multiple of lcm(group, 128) parameters costs memory.
  if (job.distributed_optimizer && a_.bucket_params > 0) {
    auto padding = [&](double n, int group) {
      if (n <= 0) return 0.0;
      return std::ceil(n / a_.bucket_params) * double(std::lcm(group, a_.bucket_pad_params));
    };
    const double pad =
        padding(s.params.dense, dense_group) + padding(s.params.expert, expert_group);
    plain.optimizer_buckets = (kBf16Bytes + a_.grad_bytes) * pad;
  }
  return s;
}

void MemoryModel::ShapeFsdp(const FamilyTerms& l, StageShape* s) const {
  // FSDP (ZeRO-3): weights, gradients and optimizer states all sharded over
  // the gradient-reduction groups, plus the units gathered at a time.
  const PipelineRank& held = s->held;
  LargestUnits units;
  units.n = std::clamp(std::max(a_.fsdp_gathered_units, a_.fsdp_gradient_units), 1, LargestUnits::kMax);
  units.Add(l.dense_unit, l.dense_unit_gemm, held.dense_layers());
  if (model_.moe) units.Add(l.moe_unit, l.moe_unit_gemm, held.moe_layers);
  units.Add(l.mtp_unit, l.mtp_unit_gemm, held.mtp_layers);
  const TablesHeld tables = params_.Tables(held);
  units.Add(l.table_unit, 0, tables.input + tables.output);
  s->fsdp_gathered = units.Params(a_.fsdp_gathered_units);
  s->fsdp_gradient = units.Params(a_.fsdp_gradient_units);
  // FP8 copies exist for the gathered units only.
  LargestUnits gathered = units;
  gathered.n = std::clamp(a_.fsdp_gathered_units, 1, LargestUnits::kMax);
  StageShape::ParamTerms& sharded = s->by_fsdp[1];
  sharded.parameters = kBf16Bytes * s->sharded;
  sharded.gradients = a_.grad_bytes * s->sharded;
  sharded.optimizer_states = kAdamBytes * s->sharded;
  sharded.fsdp_gathered = kBf16Bytes * s->fsdp_gathered;
  sharded.fsdp_gradients = a_.grad_bytes * s->fsdp_gradient;
  sharded.fp8_gemm = gathered.Gemm();
}

MemoryModel::StagePlace MemoryModel::PlaceStage(const Layout& layout, const FamilyTerms& l, int stage) const {
  const int pp = std::max(1, layout.pp);
  StagePlace at;
  at.stage = stage;
  at.inflight = InflightMicrobatches(ScheduleOf(layout), pp, layout.vpp, stage, l.microbatches);
  // Pipeline neighbours: ranks stage - 1 and stage + 1 where they exist,
  // under every schedule (under DualPipeV's V both of rank 0's stages
  // border rank 1, both of rank pp - 1's rank pp - 2).
  at.p2p_peers = l.p2p_peers + (stage == 0 ? 0 : 1) + (stage == pp - 1 ? 0 : 1);
  return at;
}

MemoryModel::StageTerms MemoryModel::ComputeStage(const Layout& layout, const FamilyTerms& l, const LayerTerms& y,
                                                  const DispatchTerms& o, const StageShape& s) const {
  StageTerms t;
  OptionStageTerms(layout.a2a_overlap, l, y, o, s, &t);
  FsdpStageTerms(layout.fsdp, o, s, &t);
  return t;
}

void MemoryModel::FsdpStageTerms(bool fsdp, const DispatchTerms& o, const StageShape& s, StageTerms* t) const {
  auto& b = t->bytes;
  // Parameters, gradients, optimizer states (ShapeStage).
  t->params = s.params;
  const StageShape::ParamTerms& p = s.by_fsdp[fsdp ? 1 : 0];
  t->fsdp_gathered = fsdp ? s.fsdp_gathered : 0;
  t->fsdp_gradient = fsdp ? s.fsdp_gradient : 0;
  t->fp8_gemm = p.fp8_gemm;
  b[kParametersIdx] = p.parameters;
  b[kFp8WeightCopiesIdx] = o.fp8 ? o.fp8_weight_bytes * t->fp8_gemm : 0;
  b[kGradientsIdx] = p.gradients;
  b[kOptimizerStatesIdx] = p.optimizer_states;
  b[kFsdpGatheredIdx] = p.fsdp_gathered;
  b[kFsdpGradientsIdx] = p.fsdp_gradients;
  b[kOptimizerBucketsIdx] = p.optimizer_buckets;
}

void MemoryModel::OptionStageTerms(bool a2a_overlap, const FamilyTerms& l, const LayerTerms& y,
                                   const DispatchTerms& o, const StageShape& s, StageTerms* t) const {
  const ModelSpec& m = model_;
  const PipelineRank& held = s.held;
  const bool first = held.embedding;
  const bool last = held.loss;
  const int mtp = held.mtp_layers;
  const bool mtp_moe = mtp > 0 && params_.mtp_moe && m.moe;
  const bool mtp_dense = mtp > 0 && !mtp_moe;
  const bool has_moe = (held.moe_layers > 0 || mtp_moe) && m.moe;
  const bool has_dense = held.dense_layers() > 0 || mtp_dense;
  const double dense_layers = held.dense_layers();
  auto& b = t->bytes;
  t->count = held;

  // FP8 scaling state.
  t->gemms = o.fp8 ? s.gemms : 0;
  b[kFp8ScalingStateIdx] = o.fp8 ? o.fp8_state_per_gemm * t->gemms : 0;

  // Activations of the micro-batches in flight, and the one layer that
  // backward rebuilds at a time.
  t->inflight = s.inflight;
  b[kActivationsIdx] =
      t->inflight * (dense_layers * y.dense.stored + held.moe_layers * y.moe.stored);
  b[kRecomputeWorkingSetIdx] =
      std::max(has_dense ? y.dense.rebuilt : 0, has_moe ? y.moe.rebuilt : 0);
  t->mtp_inflight = 0;
  b[kMtpActivationsIdx] = 0;
  b[kMtpLogitsIdx] = 0;
  if (mtp > 0) {
    // MTP sits in the loss's virtual stage: that chunk runs each
    // micro-batch's backward right after its forward, so one micro-batch
    // of it is alive; elsewhere (a pp_layout's m) the stage's count.
    t->mtp_inflight = l.mtp_with_loss && last ? 1 : t->inflight;
    const double layer = mtp_moe ? y.moe.stored : y.dense.stored;
    const double hidden = last ? 0 : kBf16Bytes * l.rows * m.hidden;  // hnorm's input, off the loss stage
    b[kMtpActivationsIdx] = t->mtp_inflight * mtp * (layer + l.rows * o.mtp_row + hidden);
    b[kMtpLogitsIdx] = t->mtp_inflight * mtp * l.mtp_logits;
  }
  b[kEmbeddingActivationsIdx] = first ? t->inflight * l.embedding_per_microbatch : 0;
  b[kOutputLogitsIdx] = last ? l.logits : 0;
  b[kDispatchBuffersIdx] = has_moe ? o.dispatch : 0;
  b[kEpOverlapIdx] = has_moe && a2a_overlap ? o.dispatch + l.deferred_wgrad : 0;
  b[kFlexBuffersIdx] = has_moe ? o.flex_nvl + o.flex_rdma : 0;

  t->collectives = s.collectives;
  t->p2p_peers = s.p2p_peers + (has_moe ? o.moe_p2p_peers : 0);
  b[kNcclBuffersIdx] =
      t->collectives * a_.nccl_collective_channels * a_.nccl_collective_connection_bytes +
      t->p2p_peers * a_.nccl_p2p_channels_per_peer * a_.nccl_p2p_buffer_bytes;

  b[kCudaContextIdx] = a_.cuda_context_gib * kBytesPerGiB;
  t->short_lived = b[kActivationsIdx] + b[kRecomputeWorkingSetIdx] + b[kMtpActivationsIdx] +
                   b[kEmbeddingActivationsIdx] + b[kOutputLogitsIdx] + b[kMtpLogitsIdx] +
                   b[kDispatchBuffersIdx] + b[kEpOverlapIdx];
  b[kFragmentationIdx] = a_.fragmentation * t->short_lived;
}

MemoryBreakdown MemoryModel::Build(const Layout& layout, const FamilyTerms& l, const LayerTerms& y,
                                   const DispatchTerms& o, int stage, const StageTerms& t) const {
  const ModelSpec& m = model_;
  const JobSpec& job = job_;
  const double h = m.hidden;
  MemoryBreakdown out;
  out.worst_stage = stage;
  out.inflight_microbatches = t.inflight;
  out.hbm_gib = hbm_gib_;
  out.peak_bytes = t.peak();
  out.fits = out.peak_gib() <= hbm_gib_;
  const bool fp8 = IsFp8(layout.precision);
  const bool has_moe = t.bytes[kDispatchBuffersIdx] > 0;
  const TablesHeld tables = params_.Tables(t.count);

  std::array<std::string, kMemoryTermCount> notes;
  const std::string sharding =
      Format("dense %.4g / dp x cp %d + expert %.4g / edp %d", t.params.dense,
             layout.dp * layout.cp, t.params.expert, layout.edp);
  notes[kParametersIdx] = Format(
      "bf16 2 B x %s%s; %d layers (%d MoE)%s, dense /tp %d, experts /(ep %d x etp %d)%s%s",
      layout.fsdp ? "FSDP shards " : "",
      layout.fsdp ? sharding.c_str()
                  : Format("(dense %.4g + expert %.4g) elements", t.params.dense,
                           t.params.expert).c_str(),
      t.count.layers, t.count.moe_layers,
      t.count.mtp_layers > 0 ? Format(" + %d MTP", t.count.mtp_layers).c_str() : "", layout.tp,
      layout.ep, layout.etp,
      tables.input > 0 ? Format(", %d input-table cop%s", tables.input,
                                tables.input > 1 ? "ies" : "y").c_str()
                       : "",
      tables.output > 0 ? ", output layer" : "");
  if (fp8) {
    const char* how = "";
    switch (layout.precision) {
      case Precision::kFP8Delayed:
      case Precision::kFP8Tensorwise:
        how = blackwell_ ? "one fp8 copy (Blackwell GEMMs read any layout)"
                         : "fp8 weight + transpose (Hopper GEMMs are TN only)";
        break;
      case Precision::kFP8Blockwise:
        how = "rowwise + columnwise fp8, fp32 scale per 128x128 block";
        break;
      case Precision::kMXFP8:
        how = "rowwise + columnwise mxfp8, E8M0 scale per 32 elements each";
        break;
      case Precision::kBF16:
        break;
    }
    notes[kFp8WeightCopiesIdx] =
        Format("%s: %.4g B x %.4g GEMM weights%s (bf16 weights kept)", how, o.fp8_weight_bytes,
               t.fp8_gemm,
               layout.fsdp ? " of the gathered FSDP units" : ", cached across micro-batches");
    notes[kFp8ScalingStateIdx] =
        o.fp8_state_per_gemm > 0
            ? Format("%.0f fp8 GEMMs x 5 scaled tensors x %.0f B (%s)", t.gemms,
                     o.fp8_state_per_gemm / kFp8ScaledTensorsPerGemm,
                     layout.precision == Precision::kFP8Delayed
                         ? Format("amax history %d + scale + scale_inv, fp32",
                                  std::max(1, a_.fp8_amax_history_len)).c_str()
                         : "scale + amax, fp32")
            : "block scales travel with their tensors (counted there)";
  } else {
    notes[kFp8WeightCopiesIdx] = "bf16 job: none";
    notes[kFp8ScalingStateIdx] = "bf16 job: none";
  }
  notes[kGradientsIdx] =
      layout.fsdp ? Format("%g B main grads x FSDP shards (%s)", a_.grad_bytes, sharding.c_str())
                  : Format("%g B main grads x %.4g elements (not sharded)", a_.grad_bytes,
                           t.params.total());
  notes[kOptimizerStatesIdx] =
      layout.fsdp || job.distributed_optimizer
          ? Format("12 B (fp32 master, Adam m, v) x (%s)%s", sharding.c_str(),
                   layout.fsdp ? ", FSDP" : "")
          : Format("12 B (fp32 master, Adam m, v) x %.4g elements, unsharded", t.params.total());
  if (layout.fsdp) {
    notes[kFsdpGatheredIdx] = Format(
        "bf16 2 B x %.4g elements: the %d largest units (layers, tables) gathered at once, "
        "the one computing and the one prefetched",
        t.fsdp_gathered, a_.fsdp_gathered_units);
    notes[kFsdpGradientsIdx] = Format(
        "%g B x %.4g elements: unsharded gradients of the %d largest units, the one computing "
        "and the one being reduce-scattered",
        a_.grad_bytes, t.fsdp_gradient, a_.fsdp_gradient_units);
  } else {
    notes[kFsdpGatheredIdx] = "no FSDP";
    notes[kFsdpGradientsIdx] = "no FSDP";
  }
  notes[kActivationsIdx] = Format(
      "%.3g micro-batches in flight x (%d dense x %.3f GiB + %d MoE x %.3f GiB) per micro-batch, "
      "recompute %s, %s, T = %.0f rows, R = %.0f expert rows",
      t.inflight, t.count.layers - t.count.moe_layers, GiB(y.dense.stored), t.count.moe_layers,
      GiB(y.moe.stored), Name(layout.recompute).c_str(), Name(layout.precision), l.rows,
      l.expert_rows);
  if (t.bytes[kRecomputeWorkingSetIdx] <= 0) {
    notes[kRecomputeWorkingSetIdx] = "nothing recomputed";
  } else if (layout.recompute.full()) {
    notes[kRecomputeWorkingSetIdx] = Format(
        "one layer's full activations while it is recomputed: max(dense %.3f, MoE %.3f GiB)",
        GiB(y.dense.rebuilt), GiB(y.moe.rebuilt));
  } else {
    notes[kRecomputeWorkingSetIdx] = Format(
        "the largest sub-layer set %s rebuilds at a time: max(dense layer %.3f, MoE layer "
        "%.3f GiB)",
        Name(layout.recompute).c_str(), GiB(y.dense.rebuilt), GiB(y.moe.rebuilt));
  }
  notes[kMtpActivationsIdx] =
      t.count.mtp_layers > 0
          ? Format("%g micro-batch%s x %d MTP x (one %s layer + enorm input, eh_proj input 2H, "
                   "final-norm and head inputs: %.0f B x T %.0f)",
                   t.mtp_inflight, t.mtp_inflight == 1 ? "" : "es", t.count.mtp_layers,
                   params_.mtp_moe ? "MoE" : "dense", o.mtp_row, l.rows)
          : "no MTP layer on this stage";
  notes[kEmbeddingActivationsIdx] =
      t.count.embedding ? "int64 token and position ids of the micro-batches in flight"
                        : "not the first stage";
  notes[kOutputLogitsIdx] =
      t.count.loss
          ? Format("fp32 logits mbs %d x S/cp %.0f x vocab/tp %.0f x 4 B + final-norm and "
                   "output-layer inputs",
                   layout.mbs, double(job.seq_len) / std::max(1, layout.cp),
                   double(m.vocab) / std::max(1, layout.tp))
          : "not the last stage";
  notes[kMtpLogitsIdx] =
      t.count.mtp_layers > 0
          ? Format("%g micro-batch%s x %d MTP heads x fp32 logits mbs %d x S/cp %.0f x vocab/tp "
                   "%.0f x 4 B",
                   t.mtp_inflight, t.mtp_inflight == 1 ? "" : "es", t.count.mtp_layers,
                   layout.mbs, double(job.seq_len) / std::max(1, layout.cp),
                   double(m.vocab) / std::max(1, layout.tp))
          : "no MTP layer on this stage";
  if (!has_moe) {
    notes[kDispatchBuffersIdx] = "no MoE layer on this stage";
  } else if (IsFlex(layout.dispatcher)) {
    notes[kDispatchBuffersIdx] = Format(
        "one MoE layer, %s: max(dispatch: received load x T x D = %.3g x %.0f x %.2f tokens x H "
        "%d x %s, combine: fc2 output R %.0f + summed rows, bf16) = %.3f GiB",
        Name(layout.dispatcher), l.load, l.rows, o.destinations, m.hidden,
        fp8 ? "1.03 B fp8" : "2 B", l.expert_rows, GiB(o.dispatch));
  } else {
    notes[kDispatchBuffersIdx] = Format(
        "one MoE layer, %s dispatcher: T %.0f x K %d rows x H %d x 2 B, load %.3g on the "
        "busiest rank",
        Name(layout.dispatcher), l.rows, m.moe ? m.moe->top_k : 0, m.hidden, l.load);
  }
  notes[kEpOverlapIdx] =
      layout.a2a_overlap && has_moe
          ? Format("the other micro-batch's dispatch buffers %.3f GiB + deferred-wgrad output "
                   "gradients of one MoE layer (R %.0f x (H + fc1 width / etp) x 2 B%s) %.3f GiB",
                   GiB(o.dispatch), l.expert_rows, shared_fc2_in_ > 0 ? " + shared" : "",
                   GiB(l.deferred_wgrad))
          : "no EP overlap";
  if (has_moe && layout.dispatcher == Dispatcher::kDeepEP) {
    notes[kFlexBuffersIdx] = Format(
        "DeepEP over %.0f ranks, %d SMs = %d channels: NVLink %d peers x %.0f tokens x (H x 2 + "
        "%.0f B) = %.3f GiB + RDMA %d peers x 128 tokens x 2 halves = %.3f GiB",
        l.flex_ranks, job.deepep_sms, std::max(1, job.deepep_sms) / 2, int(o.flex_peers),
        DeepEpNvlRecvTokens(int(l.flex_ranks)), kDeepEpTokenMetaBytes, GiB(o.flex_nvl),
        l.flex_ranks > kDeepEpMaxNvlPeers ? int(l.flex_ranks) / kDeepEpMaxNvlPeers : 0,
        GiB(o.flex_rdma));
  } else if (has_moe && layout.dispatcher == Dispatcher::kHybridEP) {
    notes[kFlexBuffersIdx] = Format(
        "HybridEP, NVLink only: T %.0f tokens x %d peers x H %.0f x (%s dispatch + 2 B combine)",
        l.rows, int(o.flex_peers), h, fp8 ? "1.03 B fp8" : "2 B");
  } else {
    notes[kFlexBuffersIdx] = has_moe ? "not a flex dispatcher" : "no MoE layer on this stage";
  }
  notes[kNcclBuffersIdx] = Format(
      "%d collective communicators x %d channels x %.2f MiB + %d p2p peers x %d channels x "
      "%.0f MiB",
      t.collectives, a_.nccl_collective_channels,
      a_.nccl_collective_connection_bytes / kBytesPerMiB, t.p2p_peers,
      a_.nccl_p2p_channels_per_peer, a_.nccl_p2p_buffer_bytes / kBytesPerMiB);
  notes[kOptimizerBucketsIdx] =
      layout.fsdp ? "FSDP: shards padded by Megatron-FSDP (not modelled)"
      : job.distributed_optimizer
          ? "in-place reduce-scatter / all-gather on bucket views; padding only"
          : "no distributed optimizer: in-place all-reduce, no padding";
  notes[kCudaContextIdx] = Format("%.2f GiB per process (assumed)", a_.cuda_context_gib);
  notes[kFragmentationIdx] = Format("%.0f%% of %.3f GiB short-lived allocations (assumed)",
                                    100 * a_.fragmentation, GiB(t.short_lived));

  out.terms.reserve(kMemoryTermCount);
  for (int i = 0; i < kMemoryTermCount; ++i) {
    out.terms.push_back(MemoryTerm{kTermNames[i], t.bytes[static_cast<size_t>(i)],
                                   std::move(notes[static_cast<size_t>(i)])});
  }
  return out;
}

double MemoryModel::PeakBytes(const Layout& layout, int* worst_stage) const {
  return PeakBytes(layout, DescribePipeline(layout, model_), worst_stage);
}

double MemoryModel::PeakBytes(const Layout& layout, const PipelineDescription& pipeline,
                              int* worst_stage) const {
  double worst = -1;
  int worst_at = 0;
  const FamilyTerms l = ComputeFamily(layout, pipeline);
  const LayerTerms y = ComputeLayers(layout);
  const DispatchTerms o = ComputeDispatch(layout, l);
  for (size_t p = 0; p < pipeline.ranks.size(); ++p) {
    const StageShape s = ShapeStage(layout, l, static_cast<int>(p), pipeline.ranks[p], layout.fsdp);
    const double peak = ComputeStage(layout, l, y, o, s).peak();
    if (peak > worst) {
      worst = peak;
      worst_at = static_cast<int>(p);
    }
  }
  if (worst_stage) *worst_stage = worst_at;
  return worst;
}

bool MemoryModel::Fits(const Layout& layout) const {
  return PeakBytes(layout) / kBytesPerGiB <= hbm_gib_;
}

MemoryBreakdown MemoryModel::Estimate(const Layout& layout) const {
  return Estimate(layout, DescribePipeline(layout, model_));
}

MemoryBreakdown MemoryModel::Estimate(const Layout& layout, const PipelineDescription& pipeline) const {
  StageTerms worst{};
  double worst_peak = -1;
  int worst_at = 0;
  const FamilyTerms l = ComputeFamily(layout, pipeline);
  const LayerTerms y = ComputeLayers(layout);
  const DispatchTerms o = ComputeDispatch(layout, l);
  for (size_t p = 0; p < pipeline.ranks.size(); ++p) {
    StageTerms t = ComputeStage(layout, l, y, o, ShapeStage(layout, l, static_cast<int>(p), pipeline.ranks[p], layout.fsdp));
    const double peak = t.peak();
    if (peak > worst_peak) {
      worst_peak = peak;
      worst_at = static_cast<int>(p);
      worst = t;
    }
  }
  return Build(layout, l, y, o, worst_at, worst);
}

MemoryBreakdown MemoryModel::EstimateStage(const Layout& layout, int stage) const {
  assert(stage >= 0 && stage < std::max(1, layout.pp));
  const PipelineDescription pipeline = DescribePipeline(layout, model_);
  const FamilyTerms l = ComputeFamily(layout, pipeline);
  const LayerTerms y = ComputeLayers(layout);
  const DispatchTerms o = ComputeDispatch(layout, l);
  const StageShape s = ShapeStage(layout, l, stage, pipeline.ranks[static_cast<size_t>(stage)], layout.fsdp);
  return Build(layout, l, y, o, stage, ComputeStage(layout, l, y, o, s));
}

MemoryBreakdown EstimateMemory(const Layout& layout, const CostContext& ctx) {
  assert(ctx.model && ctx.job && ctx.cluster);
  return MemoryModel(ctx).Estimate(layout);
}

}  // namespace foldplan
