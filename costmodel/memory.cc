// Memory per rank: see memory.h for the interface and
// doc/cost-model-memory.md for every formula's derivation. Comments here
// say which tensor a number stands for; the doc says why it is kept.
#include "costmodel/memory.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <numeric>

#include "costmodel/schedule.h"

namespace foldplan {
namespace {

constexpr double kBf16 = 2;      // bytes: weights, activations
constexpr double kFp32 = 4;      // bytes: softmax statistics, router scores, loss logits
constexpr double kMask = 1;      // bytes: a dropout mask element
constexpr double kIndex = 8;     // bytes: an int64 token or position id
constexpr double kAdamBytes = 12;  // fp32 master weight + Adam m + Adam v
constexpr double kFp8CopyBytes = 2;  // fp8 weight + its transpose (Hopper GEMM layouts)

enum TermIndex {
  kParametersIdx,
  kFp8WeightCopiesIdx,
  kGradientsIdx,
  kOptimizerStatesIdx,
  kActivationsIdx,
  kRecomputeWorkingSetIdx,
  kEmbeddingActivationsIdx,
  kOutputLogitsIdx,
  kDispatchBuffersIdx,
  kNcclBuffersIdx,
  kOptimizerBucketsIdx,
  kCudaContextIdx,
  kFragmentationIdx,
};

constexpr const char* kTermNames[kMemoryTermCount] = {
    memory_term::kParameters,          memory_term::kFp8WeightCopies,
    memory_term::kGradients,           memory_term::kOptimizerStates,
    memory_term::kActivations,         memory_term::kRecomputeWorkingSet,
    memory_term::kEmbeddingActivations, memory_term::kOutputLogits,
    memory_term::kDispatchBuffers,     memory_term::kNcclBuffers,
    memory_term::kOptimizerBuckets,    memory_term::kCudaContext,
    memory_term::kFragmentation,
};

// Elements an MLP of width `width` keeps per token row beyond its input:
// SwiGLU keeps the fc1 output (gate and up, 2F, the activation's input) and
// the fc2 input (F); GELU keeps the GELU input (F) and the fc2 input (F).
double MlpInnerElements(Activation act, double width) {
  return act == Activation::kSwiGLU ? 3 * width : 2 * width;
}

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[320];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

double GiB(double bytes) { return bytes / kBytesPerGiB; }

long long MicroBatches(const JobSpec& job, const Layout& l) {
  const long long per_step = static_cast<long long>(std::max(1, l.dp)) * std::max(1, l.mbs);
  return std::max(1LL, job.global_batch / per_step);
}

}  // namespace

double MemoryBreakdown::bytes_of(std::string_view name) const {
  for (const MemoryTerm& t : terms) {
    if (name == t.name) return t.bytes;
  }
  return 0;
}

// One stage's terms as plain numbers, plus what the notes quote.
struct MemoryModel::StageTerms {
  std::array<double, kMemoryTermCount> bytes{};
  PipelineRank count;  // what the stage holds
  StageParams params;
  double inflight = 0;
  int collectives = 0;     // NCCL collective communicators in use
  int p2p_peers = 0;       // NCCL point-to-point peers in use
  double short_lived = 0;  // what fragmentation is charged on

  double peak() const { return std::accumulate(bytes.begin(), bytes.end(), 0.0); }
};

// What every stage of a layout shares: computed once per evaluation.
struct MemoryModel::LayoutTerms {
  long long microbatches = 1;      // m = global_batch / (dp x mbs)
  double rows = 0;                 // T: token rows per rank entering a layer
  double load = 1;                 // expert-rank load factor (imbalance or capacity)
  double layer_dense = 0;          // activation bytes per micro-batch, one dense layer
  double layer_moe = 0;            // ... one MoE layer
  double working_dense = 0;        // recompute working set of one dense layer
  double working_moe = 0;          // ... one MoE layer
  double embedding_per_microbatch = 0;
  double logits = 0;
  double dispatch = 0;             // one MoE layer's dispatch buffers
  int collectives = 0, moe_collectives = 0;  // NCCL collective communicators
  int p2p_peers = 0, moe_p2p_peers = 0;      // NCCL point-to-point peers
};

MemoryModel::MemoryModel(const ModelSpec& model, const JobSpec& job, const ClusterSpec& cluster,
                         const MemoryAssumptions& assumptions)
    : model_(&model), job_(&job), hbm_gib_(cluster.gpu.hbm_gib), a_(assumptions) {
  const ModelSpec& m = model;
  const double h = m.hidden;

  // Parameters per layer, by how they are sharded.
  const LayerParams dense = m.layer_params(false);
  dense_layer_tp_ = double(dense.attention) + double(dense.dense_mlp);
  dense_layer_replicated_ = double(dense.attention_replicated) + double(dense.norms);
  // fp8 casts every decoder GEMM weight: the TP-split parts and the
  // replicated MLA down-projections (attention_replicated's norm vectors
  // are a rounding error next to those).
  layer_gemm_replicated_ = double(dense.attention_replicated);
  if (m.is_moe()) {
    const LayerParams moe = m.layer_params(true);
    moe_layer_tp_ = double(moe.attention) + double(moe.shared_experts);
    moe_layer_replicated_ = double(moe.attention_replicated) + double(moe.norms) +
                            double(moe.router) + double(moe.shared_expert_gate);
    moe_layer_experts_ = double(moe.routed_experts) * double(moe.routed_expert);
  }
  embeddings_ = m.embedding_params();

  // Activations per token row (doc section "Activations").
  const double q = double(m.heads) * m.head_dim;
  const double k = double(m.kv_heads) * m.head_dim;
  const double v = double(m.kv_heads) * m.v_head_dim();
  const double o = double(m.heads) * m.v_head_dim();
  double latent = 0;  // MLA: each latent's norm input and up-projection input
  if (m.attention == AttentionKind::kMLA && m.mla) {
    latent = 2.0 * m.mla->kv_lora_rank + (m.mla->q_lora_rank > 0 ? 2.0 * m.mla->q_lora_rank : 0);
  }
  const double qk_norm_inputs = m.qk_norm ? q + k : 0;
  // norm input (H) + QKV / down-projection input (H) + latents + q, k, v
  // (after rotary) + attention output = out-projection input.
  attention_row_bytes_ = kBf16 * (2 * h + latent + q + k + v + o + qk_norm_inputs) +
                         (a_.dropout ? kMask * h : 0);  // mask after the out-projection
  if (a_.flash_attention) {
    core_row_bytes_ = kFp32 * m.heads;  // log-sum-exp per head and query row
  } else {
    // softmax output (2 B); with dropout also its mask (1 B) and output (2 B).
    core_square_bytes_ = a_.dropout ? kBf16 + kMask + kBf16 : kBf16;
  }
  // pre-MLP norm input (H) + fc1 input (H) + the MLP's inner tensors.
  dense_mlp_row_bytes_ = kBf16 * (2 * h + MlpInnerElements(m.activation, m.ffn_hidden)) +
                         (a_.dropout ? kMask * h : 0);
  if (m.is_moe()) {
    const MoeSpec& e = *m.moe;
    const double shared_width = double(e.shared_experts) * e.shared_ffn_hidden;
    moe_row_bytes_ = kBf16 * (2 * h)                        // norm input, router input
                     + kFp32 * e.experts + kFp32 * e.top_k  // router scores, top-k probs
                     + kBf16 * MlpInnerElements(m.activation, shared_width)  // shared experts
                     + kBf16 * double(e.top_k) * h          // combine input, K rows per token
                     + (a_.dropout ? kMask * h : 0);
    expert_row_hidden_bytes_ = kBf16 * h;  // fc1 input, one row per (token, expert)
    expert_row_ffn_bytes_ = kBf16 * MlpInnerElements(m.activation, e.ffn_hidden);
  }
}

MemoryModel::MemoryModel(const CostContext& ctx, const MemoryAssumptions& assumptions)
    : MemoryModel(*ctx.model, *ctx.job, *ctx.cluster, assumptions) {}

double MemoryModel::ExpertLoad(const Layout& layout) const {
  // A capacity factor pads every expert's buffer to CF x its mean share
  // (Megatron --moe-pad-expert-input-to-capacity): the bound whatever the
  // routing. Dropless: the busiest expert's load / mean (routing_imbalance)
  // bounds the busiest rank's. With ep 1 every rank holds every expert and
  // receives exactly its own T K rows.
  if (job_->capacity_factor > 0) return job_->capacity_factor;
  return layout.ep > 1 ? std::max(1.0, job_->routing_imbalance) : 1.0;
}

double MemoryModel::LayerActivationBytes(const Layout& layout, bool moe_layer,
                                         Recompute recompute) const {
  const ModelSpec& m = *model_;
  const double tp = std::max(1, layout.tp);
  const double cp = std::max(1, layout.cp);
  const double seq = job_->seq_len;
  const double mbs = std::max(1, layout.mbs);
  // Token rows per rank: the sequence split over CP, and (sequence
  // parallelism) the non-matmul tensors over TP; TP-split matmul outputs
  // have all mbs S / cp rows but 1/tp of the width, the same element count.
  const double rows = mbs * seq / (cp * tp);
  if (recompute.full()) return kBf16 * rows * m.hidden;  // the layer input only

  double bytes = rows * attention_row_bytes_;
  if (!recompute.has(RecomputeModule::kCoreAttn)) {
    // Ulysses: heads / (tp cp) heads over the whole sequence; ring: heads /
    // tp over S / cp queries and all S keys. Either way mbs a S^2 / (tp cp).
    bytes += a_.flash_attention ? rows * core_row_bytes_
                                : mbs * m.heads * seq * seq / (tp * cp) * core_square_bytes_;
  }
  if (!moe_layer || !m.moe) return bytes + rows * dense_mlp_row_bytes_;

  const double etp = std::max(1, layout.etp);
  // Expert rows on the busiest rank: the ETP all-gather collects etp ranks'
  // dispatched rows, T K each on average, `load` times that on the busiest.
  const double expert_rows = etp * ExpertLoad(layout) * rows * m.moe->top_k;
  return bytes + rows * moe_row_bytes_ +
         expert_rows * (expert_row_hidden_bytes_ + expert_row_ffn_bytes_ / etp);
}

StageParams MemoryModel::ParamsFor(const Layout& layout, const PipelineRank& held) const {
  const double tp = std::max(1, layout.tp);
  const double expert_shards = double(std::max(1, layout.ep)) * std::max(1, layout.etp);
  const int pp = std::max(1, layout.pp);
  const double moe = held.moe_layers;
  const double dense = held.dense_layers();

  StageParams p;
  p.dense = dense * (dense_layer_tp_ / tp + dense_layer_replicated_) +
            moe * (moe_layer_tp_ / tp + moe_layer_replicated_);
  p.expert = moe * moe_layer_experts_ / expert_shards;
  p.gemm = dense * (dense_layer_tp_ / tp + layer_gemm_replicated_) +
           moe * (moe_layer_tp_ / tp + layer_gemm_replicated_) + p.expert;
  const double table = double(embeddings_.input_embedding) / tp;  // vocab-parallel
  if (held.embedding) p.dense += table + double(embeddings_.position_embedding);
  if (held.loss) {
    p.dense += double(embeddings_.final_norm);
    if (embeddings_.output_layer > 0) {
      p.dense += double(embeddings_.output_layer) / tp;
    } else if (pp > 1) {
      p.dense += table;  // tied: the last stage holds its own copy of the table
    }
  }
  return p;
}

StageParams MemoryModel::ParamsOnStage(const Layout& layout, int stage) const {
  return ParamsOnStage(layout, DescribePipeline(layout, *model_), stage);
}

StageParams MemoryModel::ParamsOnStage(const Layout& layout, const PipelineDescription& pipeline,
                                       int stage) const {
  if (stage < 0 || stage >= static_cast<int>(pipeline.ranks.size())) return StageParams{};
  return ParamsFor(layout, pipeline.ranks[static_cast<size_t>(stage)]);
}

MemoryModel::LayoutTerms MemoryModel::ComputeLayout(const Layout& layout) const {
  const ModelSpec& m = *model_;
  const JobSpec& job = *job_;
  const double tp = std::max(1, layout.tp);
  const double cp = std::max(1, layout.cp);
  const double ep = std::max(1, layout.ep);
  const double etp = std::max(1, layout.etp);
  const double mbs = std::max(1, layout.mbs);
  const double seq = job.seq_len;
  const bool moe_model = m.moe.has_value();

  LayoutTerms l;
  l.microbatches = MicroBatches(job, layout);
  l.rows = mbs * seq / (cp * tp);
  l.load = ExpertLoad(layout);
  l.layer_dense = LayerActivationBytes(layout, false, layout.recompute);
  l.layer_moe = moe_model ? LayerActivationBytes(layout, true, layout.recompute) : 0;

  // What backward rebuilds for one layer at a time.
  if (!layout.recompute.full() && layout.recompute.has(RecomputeModule::kCoreAttn)) {
    const double core = a_.flash_attention
                            ? l.rows * core_row_bytes_
                            : mbs * m.heads * seq * seq / (tp * cp) * core_square_bytes_;
    l.working_dense = l.working_moe = core;
  } else if (layout.recompute.full()) {
    l.working_dense = LayerActivationBytes(layout, false, Recompute::None());
    l.working_moe = moe_model ? LayerActivationBytes(layout, true, Recompute::None()) : 0;
  }

  // Embedding: int64 token and position ids of a micro-batch (each rank of a
  // CP group reads its S / cp positions), + the embedding's dropout mask.
  l.embedding_per_microbatch =
      2 * kIndex * mbs * seq / cp + (a_.dropout ? kMask * l.rows * m.hidden : 0);
  // Output: the loss keeps fp32 vocab-parallel logits of one micro-batch
  // (the last stage runs each micro-batch's backward right after its last
  // forward), plus the final norm's and output layer's inputs.
  l.logits = kFp32 * mbs * seq / cp * double(m.vocab) / tp + 2 * kBf16 * l.rows * m.hidden;

  // One MoE layer's dispatch buffers (transient; backward mirrors them).
  if (moe_model) {
    const double k = m.moe->top_k;
    const double row = kBf16 * m.hidden;
    switch (layout.dispatcher) {
      case Dispatcher::kAllToAll:
        l.dispatch = l.rows * k * row;                             // permuted send buffer
        if (ep > 1) l.dispatch += l.load * l.rows * k * row;       // all-to-all receive
        if (etp > 1) l.dispatch += etp * l.load * l.rows * k * row;  // ETP gather, unsorted
        break;
      case Dispatcher::kAllGather:
        l.dispatch = etp * ep * l.rows * row;  // hidden states gathered over the TP-EP group
        break;
      case Dispatcher::kDeepEP:
      case Dispatcher::kHybridEP: {
        // One copy per distinct destination rank: ep (1 - (1 - 1/ep)^K).
        const double destinations = ep * (1 - std::pow(1 - 1 / ep, k));
        l.dispatch = (1 + l.load) * l.rows * destinations * row;
        if (etp > 1) l.dispatch += etp * l.load * l.rows * k * row;
        break;
      }
    }
  }

  // NCCL communicators every stage uses (created lazily, so only those used);
  // the MoE ones only on stages with MoE layers, the pipeline and embedding
  // ones per stage (ComputeStage).
  auto groups = [](double size) { return size > 1 ? 1 : 0; };
  l.collectives = groups(tp)                                        // sequence-parallel AG / RS
                  + groups(double(std::max(1, layout.dp)) * cp);    // dense gradients
  l.moe_collectives = groups(etp)                                   // expert-TP AG / RS
                      + groups(std::max(1, layout.edp))             // expert gradients
                      + groups(tp * ep);  // token counts (all-to-all) or the all-gather itself
  if (cp > 1) {
    l.p2p_peers = layout.cp_style == CpStyle::kUlysses ? int(cp) - 1 : std::min(2, int(cp) - 1);
  }
  if (ep > 1 && layout.dispatcher != Dispatcher::kAllGather) l.moe_p2p_peers = int(ep) - 1;
  return l;
}

MemoryModel::StageTerms MemoryModel::ComputeStage(const Layout& layout, const LayoutTerms& l,
                                                  int stage, const PipelineRank& held) const {
  const JobSpec& job = *job_;
  const int pp = std::max(1, layout.pp);
  const bool first = held.embedding;
  const bool last = held.loss;
  const bool has_moe = held.moe_layers > 0 && model_->moe;
  const double dense_layers = held.dense_layers();

  StageTerms t;
  t.count = held;
  auto& b = t.bytes;

  // Parameters, gradients, optimizer states.
  t.params = ParamsFor(layout, held);
  const double params = t.params.total();
  b[kParametersIdx] = kBf16 * params;
  b[kFp8WeightCopiesIdx] = IsFp8(layout.precision) ? kFp8CopyBytes * t.params.gemm : 0;
  b[kGradientsIdx] = a_.grad_bytes * params;
  const int dense_group = std::max(1, layout.dp) * std::max(1, layout.cp);  // dense grads: dp x cp
  const int expert_group = std::max(1, layout.edp);                        // expert grads: edp
  b[kOptimizerStatesIdx] =
      job.distributed_optimizer
          ? kAdamBytes * (t.params.dense / dense_group + t.params.expert / expert_group)
          : kAdamBytes * params;

  // Activations of the micro-batches in flight, and the one layer that
  // backward rebuilds at a time.
  t.inflight = InflightMicrobatches(ScheduleOf(layout), pp, layout.vpp, stage, l.microbatches);
  b[kActivationsIdx] =
      t.inflight * (dense_layers * l.layer_dense + held.moe_layers * l.layer_moe);
  b[kRecomputeWorkingSetIdx] =
      std::max(dense_layers > 0 ? l.working_dense : 0, has_moe ? l.working_moe : 0);
  if (first) b[kEmbeddingActivationsIdx] = t.inflight * l.embedding_per_microbatch;
  if (last) b[kOutputLogitsIdx] = l.logits;
  if (has_moe) b[kDispatchBuffersIdx] = l.dispatch;

  t.collectives = l.collectives + (has_moe ? l.moe_collectives : 0) +
                  (model_->tied_embeddings && pp > 1 && (first || last) ? 1 : 0);  // tie group
  t.p2p_peers = l.p2p_peers + (has_moe ? l.moe_p2p_peers : 0) +
                (first ? 0 : 1) + (last ? 0 : 1);  // pipeline neighbours
  b[kNcclBuffersIdx] =
      t.collectives * a_.nccl_collective_channels * a_.nccl_collective_connection_bytes +
      t.p2p_peers * a_.nccl_p2p_channels_per_peer * a_.nccl_p2p_buffer_bytes;

  // Distributed optimizer: reduce-scatter and all-gather run in place on
  // bucket views of the gradient and parameter buffers; only each bucket's
  // padding to a multiple of lcm(group, 128) parameters costs memory.
  if (job.distributed_optimizer && a_.bucket_params > 0) {
    auto padding = [&](double n, int group) {
      if (n <= 0) return 0.0;
      return std::ceil(n / a_.bucket_params) * double(std::lcm(group, a_.bucket_pad_params));
    };
    const double pad =
        padding(t.params.dense, dense_group) + padding(t.params.expert, expert_group);
    b[kOptimizerBucketsIdx] = (kBf16 + a_.grad_bytes) * pad;
  }

  b[kCudaContextIdx] = a_.cuda_context_gib * kBytesPerGiB;
  t.short_lived = b[kActivationsIdx] + b[kRecomputeWorkingSetIdx] + b[kEmbeddingActivationsIdx] +
                  b[kOutputLogitsIdx] + b[kDispatchBuffersIdx];
  b[kFragmentationIdx] = a_.fragmentation * t.short_lived;
  return t;
}

MemoryBreakdown MemoryModel::Build(const Layout& layout, const LayoutTerms& l, int stage,
                                   const StageTerms& t) const {
  const ModelSpec& m = *model_;
  const JobSpec& job = *job_;
  const int pp = std::max(1, layout.pp);
  MemoryBreakdown out;
  out.worst_stage = stage;
  out.inflight_microbatches = t.inflight;
  out.hbm_gib = hbm_gib_;
  out.peak_bytes = t.peak();
  out.fits = out.peak_gib() <= hbm_gib_;

  std::array<std::string, kMemoryTermCount> notes;
  notes[kParametersIdx] = Format(
      "bf16 2 B x (dense %.4g + expert %.4g) elements; %d layers (%d MoE), dense /tp %d, "
      "experts /(ep %d x etp %d)%s%s",
      t.params.dense, t.params.expert, t.count.layers, t.count.moe_layers, layout.tp, layout.ep,
      layout.etp, stage == 0 ? ", input embedding" : "",
      stage == pp - 1 ? (m.tied_embeddings && pp == 1 ? "" : ", output layer") : "");
  notes[kFp8WeightCopiesIdx] =
      IsFp8(layout.precision)
          ? Format("fp8 weight + transpose cached across micro-batches, 2 B x %.4g GEMM weights "
                   "(bf16 weights kept)",
                   t.params.gemm)
          : "bf16 job: none";
  notes[kGradientsIdx] = Format("%g B main grads x %.4g elements (not sharded)", a_.grad_bytes,
                                t.params.total());
  notes[kOptimizerStatesIdx] =
      job.distributed_optimizer
          ? Format("12 B (fp32 master, Adam m, v) x (dense %.4g / dp x cp %d + expert %.4g / "
                   "edp %d)",
                   t.params.dense, layout.dp * layout.cp, t.params.expert, layout.edp)
          : Format("12 B (fp32 master, Adam m, v) x %.4g elements, unsharded", t.params.total());
  notes[kActivationsIdx] = Format(
      "%.3g micro-batches in flight x (%d dense x %.3f GiB + %d MoE x %.3f GiB) per micro-batch, "
      "recompute %s, T = %.0f rows",
      t.inflight, t.count.layers - t.count.moe_layers, GiB(l.layer_dense), t.count.moe_layers,
      GiB(l.layer_moe), Name(layout.recompute).c_str(), l.rows);
  if (layout.recompute.full()) {
    notes[kRecomputeWorkingSetIdx] = "one layer's full activations while it is recomputed";
  } else if (layout.recompute.has(RecomputeModule::kCoreAttn)) {
    notes[kRecomputeWorkingSetIdx] = "one layer's attention core while it is recomputed";
  } else {
    notes[kRecomputeWorkingSetIdx] = "no recomputation";
  }
  notes[kEmbeddingActivationsIdx] =
      stage == 0 ? "int64 token and position ids of the micro-batches in flight"
                 : "not the first stage";
  notes[kOutputLogitsIdx] =
      stage == pp - 1
          ? Format("fp32 logits mbs %d x S/cp %.0f x vocab/tp %.0f x 4 B + final-norm and "
                   "output-layer inputs",
                   layout.mbs, double(job.seq_len) / std::max(1, layout.cp),
                   double(m.vocab) / std::max(1, layout.tp))
          : "not the last stage";
  notes[kDispatchBuffersIdx] =
      t.count.moe_layers > 0
          ? Format("one MoE layer, %s dispatcher: T %.0f x K %d rows x H %d x 2 B, load %.3g on "
                   "the busiest rank",
                   Name(layout.dispatcher), l.rows, m.moe ? m.moe->top_k : 0, m.hidden, l.load)
          : "no MoE layer on this stage";
  notes[kNcclBuffersIdx] = Format(
      "%d collective communicators x %d channels x %.2f MiB + %d p2p peers x %d channels x "
      "%.0f MiB",
      t.collectives, a_.nccl_collective_channels,
      a_.nccl_collective_connection_bytes / kBytesPerMiB, t.p2p_peers,
      a_.nccl_p2p_channels_per_peer, a_.nccl_p2p_buffer_bytes / kBytesPerMiB);
  notes[kOptimizerBucketsIdx] =
      job.distributed_optimizer
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
  return PeakBytes(layout, DescribePipeline(layout, *model_), worst_stage);
}

double MemoryModel::PeakBytes(const Layout& layout, const PipelineDescription& pipeline,
                              int* worst_stage) const {
  double worst = -1;
  int worst_at = 0;
  const LayoutTerms l = ComputeLayout(layout);
  for (size_t p = 0; p < pipeline.ranks.size(); ++p) {
    const double peak = ComputeStage(layout, l, static_cast<int>(p), pipeline.ranks[p]).peak();
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
  return Estimate(layout, DescribePipeline(layout, *model_));
}

MemoryBreakdown MemoryModel::Estimate(const Layout& layout, const PipelineDescription& pipeline) const {
  StageTerms worst;
  double worst_peak = -1;
  int worst_at = 0;
  const LayoutTerms l = ComputeLayout(layout);
  for (size_t p = 0; p < pipeline.ranks.size(); ++p) {
    StageTerms t = ComputeStage(layout, l, static_cast<int>(p), pipeline.ranks[p]);
    const double peak = t.peak();
    if (peak > worst_peak) {
      worst_peak = peak;
      worst_at = static_cast<int>(p);
      worst = t;
    }
  }
  return Build(layout, l, worst_at, worst);
}

MemoryBreakdown MemoryModel::EstimateStage(const Layout& layout, int stage) const {
  assert(stage >= 0 && stage < std::max(1, layout.pp));
  const PipelineDescription pipeline = DescribePipeline(layout, *model_);
  const LayoutTerms l = ComputeLayout(layout);
  return Build(layout, l, stage, ComputeStage(layout, l, stage, pipeline.ranks[static_cast<size_t>(stage)]));
}

MemoryBreakdown EstimateMemory(const Layout& layout, const CostContext& ctx) {
  assert(ctx.model && ctx.job && ctx.cluster);
  return MemoryModel(ctx).Estimate(layout);
}

}  // namespace foldplan
