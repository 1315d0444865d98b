// Memory per rank of a layout, broken down into named terms, for the worst
// pipeline stage. Every term, its formula, derivation and the assumptions
// behind it are in doc/cost-model-memory.md; the numbers assumed are the
// fields of MemoryAssumptions below, none hidden in a margin.
//
// Use a MemoryModel when evaluating many layouts of one (model, job,
// cluster): it precomputes the per-layer parameter and activation widths,
// and its PeakBytes() allocates nothing beyond the pipeline description.
// EstimateMemory() is the one-shot convenience over a CostContext.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "costmodel/cost_context.h"
#include "costmodel/rank_params.h"
#include "planner/layout.h"
#include "planner/pipeline.h"

namespace foldplan {

inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;  // 2^30
inline constexpr double kBytesPerMiB = 1024.0 * 1024.0;

// Term names, in the order MemoryBreakdown::terms lists them.
namespace memory_term {
inline constexpr const char* kParameters = "parameters";
inline constexpr const char* kFp8WeightCopies = "fp8 weight copies";
inline constexpr const char* kFp8ScalingState = "fp8 scaling state";
inline constexpr const char* kGradients = "gradients";
inline constexpr const char* kOptimizerStates = "optimizer states";
inline constexpr const char* kFsdpGatheredParameters = "FSDP gathered parameters";
inline constexpr const char* kFsdpUnshardedGradients = "FSDP unsharded gradients";
inline constexpr const char* kActivations = "activations";
inline constexpr const char* kRecomputeWorkingSet = "recompute working set";
inline constexpr const char* kMtpActivations = "MTP activations";
inline constexpr const char* kEmbeddingActivations = "embedding activations";
inline constexpr const char* kOutputLogits = "output logits";
inline constexpr const char* kMtpLogits = "MTP logits";
inline constexpr const char* kDispatchBuffers = "all-to-all dispatch buffers";
inline constexpr const char* kEpOverlap = "EP overlap second micro-batch";
inline constexpr const char* kFlexDispatcherBuffers = "flex dispatcher buffers";
inline constexpr const char* kNcclBuffers = "NCCL buffers";
inline constexpr const char* kOptimizerBuckets = "optimizer buckets";
inline constexpr const char* kCudaContext = "CUDA context";
inline constexpr const char* kFragmentation = "allocator fragmentation";
}  // namespace memory_term
inline constexpr int kMemoryTermCount = 20;

struct MemoryTerm {
  const char* name;  // one of memory_term::k*
  double bytes;
  std::string note;  // the formula with this layout's numbers
};

struct MemoryBreakdown {
  std::vector<MemoryTerm> terms;  // all kMemoryTermCount terms, zeros included
  double peak_bytes = 0;          // sum of the terms
  double peak_gib() const { return peak_bytes / kBytesPerGiB; }
  double hbm_gib = 0;             // cluster.gpu.hbm_gib
  bool fits = false;              // peak_gib() <= hbm_gib
  int worst_stage = 0;            // pipeline rank the breakdown is for
  double inflight_microbatches = 0;  // micro-batches of activations alive there

  // Bytes of the named term; 0 when there is none of that name.
  double bytes_of(std::string_view name) const;
};

// Every number the model assumes, with its default. doc/cost-model-memory.md
// gives the source or reasoning of each.
struct MemoryAssumptions {
  // Main-gradient buffer bytes per parameter: 4 (fp32, Megatron's default
  // accumulate-and-reduce in fp32); 2 models --grad-reduce-in-bf16 style
  // bf16 gradient buffers.
  double grad_bytes = 4;
  // Fused (flash / cuDNN) attention: no s x s matrix is stored, only the
  // fp32 softmax statistics (log-sum-exp) per head and token.
  bool flash_attention = true;
  // Dropout masks (1 B per element) after attention, after the MLP, inside
  // non-fused attention and after the embedding. Megatron's MoE recipes
  // train with dropout 0, and PyTorch stores no mask at p = 0.
  bool dropout = false;
  // Driver context + PyTorch / cuBLAS / cuDNN / Transformer Engine handles and
  // workspaces, per process, as nvidia-smi sees it on Hopper.
  double cuda_context_gib = 0.6;
  // Caching-allocator fragmentation, as a fraction of the short-lived
  // allocations (activations, recompute working set, logits, dispatch
  // buffers). Parameter, gradient and optimizer buffers are few large
  // contiguous allocations and are not charged.
  double fragmentation = 0.10;
  // NCCL: bytes per ring connection of a collective communicator (Simple
  // 4 MiB = NCCL_BUFFSIZE, LL128 4.6875 MiB, LL 0.5 MiB) and channels per
  // collective communicator.
  double nccl_collective_connection_bytes = (4.0 + 4.6875 + 0.5) * kBytesPerMiB;
  int nccl_collective_channels = 16;
  // NCCL point-to-point (all-to-all, pipeline send/recv, CP): Simple buffer
  // per peer per channel, channels per peer.
  double nccl_p2p_buffer_bytes = 4.0 * kBytesPerMiB;
  int nccl_p2p_channels_per_peer = 2;
  // Distributed-optimizer bucket size in parameters (Megatron's
  // --ddp-bucket-size default 40M) and the padding unit per bucket.
  double bucket_params = 40e6;
  int bucket_pad_params = 128;
  // Megatron-Core (0.13 on) multiplies the routing probabilities inside the
  // experts' fused weighted SwiGLU (weighted_bias_swiglu_impl, fed
  // permuted_probs) and combines without them: the combine keeps no K x H
  // input; each expert row keeps its fp32 probability instead. false:
  // probabilities applied at unpermute (older Megatron), which keeps the K
  // expert outputs of every token for the probabilities' gradient.
  bool expert_probs_in_activation = true;
  // Megatron-Core's Transformer Engine layer spec fuses the MHA/GQA input
  // norm into linear_qkv and the dense pre-MLP norm into fc1
  // (TELayerNormColumnParallelLinear, the norm module an IdentityOp); MLA's
  // input norm and the MoE pre-MLP norm are separate TENorm modules. The
  // `layernorm` recompute module only drops separate norms' outputs
  // (TransformerLayer skips IdentityOp norms). false: every norm separate.
  bool norms_fused_into_linear = true;
  // The router's auxiliary load-balancing loss (Megatron's default
  // --moe-router-load-balancing-type aux_loss; seq_aux_loss and
  // global_aux_loss alike) keeps a second fp32 T x E score tensor.
  bool router_aux_loss = true;
  // FP8 delayed scaling: amax history per scaled tensor
  // (--fp8-amax-history-len, Megatron's default 1).
  int fp8_amax_history_len = 1;
  // Megatron-FSDP (ZeRO-3): units (a decoder or MTP layer, the embedding,
  // the output layer) whose parameters are gathered at once: the one being
  // computed and the one prefetched behind it.
  int fsdp_gathered_units = 2;
  // ... and units whose unsharded fp32 gradients are alive at once in
  // backward: the one being computed and the one being reduce-scattered.
  int fsdp_gradient_units = 2;
};

// Owns copies of the model and job it was built from (a temporary spec
// passed in cannot dangle), and reads nothing else of the cluster
// after construction.
class MemoryModel {
 public:
  MemoryModel(const ModelSpec& model, const JobSpec& job, const ClusterSpec& cluster,
              const MemoryAssumptions& assumptions = {});
  explicit MemoryModel(const CostContext& ctx, const MemoryAssumptions& assumptions = {});

  // What each stage holds comes from the layout's pipeline description
  // (planner/pipeline.h): pass it when it is already built, or let these
  // build it (DescribePipeline). The micro-batches of activations in flight
  // come from the schedule (costmodel/schedule.h).

  // The breakdown of the stage with the highest peak (ties: the lowest stage).
  MemoryBreakdown Estimate(const Layout& layout) const;
  MemoryBreakdown Estimate(const Layout& layout, const PipelineDescription& pipeline) const;
  // The breakdown of pipeline rank `stage` (0 <= stage < pp).
  MemoryBreakdown EstimateStage(const Layout& layout, int stage) const;
  // Peak bytes of the worst stage; `worst_stage` may be null.
  double PeakBytes(const Layout& layout, int* worst_stage = nullptr) const;
  double PeakBytes(const Layout& layout, const PipelineDescription& pipeline, int* worst_stage = nullptr) const;
  bool Fits(const Layout& layout) const;

  // Pieces, for tests and reports.
  // Bytes one decoder layer keeps for backward, per micro-batch, on one rank,
  // under the layout's precision (FP8 linears keep FP8 inputs).
  double LayerActivationBytes(const Layout& layout, bool moe_layer, Recompute recompute) const;
  // The largest set of tensors backward rebuilds at a time for that layer
  // (the recompute working set): its sub-layer (attention, or MLP / MoE)
  // with the most recomputed bytes; the whole layer under full.
  double LayerRecomputeBytes(const Layout& layout, bool moe_layer, Recompute recompute) const;
  // What grows with the expert rows a rank receives, at the costed load
  // (the busiest rank's, ExpertLoadFactor): one MoE layer's stored
  // expert-row activations per micro-batch (the dispatched tokens' expert
  // inputs, fc1 outputs, probabilities, fc2 inputs), and the part of one
  // MoE layer's transient dispatch buffers sized by the rows received
  // (alltoall: the receive and ETP-gather buffers, not the send buffer;
  // DeepEP and HybridEP: all of it; allgather: none, it gathers every
  // token). A rank receiving x times the costed rows holds (x - 1) times
  // these more (sim/simulate.h, per-rank memory under imbalance).
  struct ReceivedRowBytes {
    double activations_per_moe_layer = 0;
    double dispatch = 0;
  };
  ReceivedRowBytes BytesOfReceivedRows(const Layout& layout) const;
  // Parameter elements on one rank of pipeline rank `stage` (rank_params.h).
  StageParams ParamsOnStage(const Layout& layout, int stage) const;
  StageParams ParamsOnStage(const Layout& layout, const PipelineDescription& pipeline, int stage) const;

  const MemoryAssumptions& assumptions() const { return a_; }

 private:
  friend class FamilyPeakMemo;
  // A layout's terms in parts, so that layouts differing only in recipe
  // options share the first two, and those differing only in options a
  // part does not read share that part (FamilyPeakMemo):
  struct FamilyTerms;    // what every stage of the layouts of one family shares
  struct StageShape;     // one stage of a family: what no recipe option but fsdp changes
  struct StagePlace;     // the fields of a StageShape that read the stage's index
  struct LayerTerms;     // what (recompute, precision) add: the layers
  struct DispatchTerms;  // what (precision, dispatcher) add
  struct StageTerms;     // the terms of one stage, as plain doubles
  struct LayerBytes {  // one layer kind, one micro-batch, on one rank
    double stored = 0;   // kept for backward
    double rebuilt = 0;  // the largest set backward rebuilds at a time (recompute working set)
    double routed = 0;   // of stored, the routed experts' rows (grows with the rows received)
  };

  FamilyTerms ComputeFamily(const Layout& layout, const PipelineDescription& pipeline) const;
  // Read of the recipe options only recompute and precision; precision and dispatcher.
  LayerTerms ComputeLayers(const Layout& layout) const;
  DispatchTerms ComputeDispatch(const Layout& layout, const FamilyTerms& family) const;
  // `fsdp`: with the FSDP terms (ShapeFsdp; else left 0: ComputeStage reads them only under fsdp).
  StageShape ShapeStage(const Layout& layout, const FamilyTerms& family, int stage,
                        const PipelineRank& held, bool fsdp) const;
  void ShapeFsdp(const FamilyTerms& family, StageShape* shape) const;
  // The fields of a shape that read the stage's index; ShapeStage reads it
  // nowhere else, so a shape of another stage that holds the same is this
  // one's placed anew (StageShape::Place).
  StagePlace PlaceStage(const Layout& layout, const FamilyTerms& family, int stage) const;
  // Reads of `layout` only fsdp and a2a_overlap: OptionStageTerms sets every
  // field of the stage's terms but those FsdpStageTerms sets (the parameter
  // terms fsdp picks among), so the two fsdp ways share the first.
  StageTerms ComputeStage(const Layout& layout, const FamilyTerms& family, const LayerTerms& layers,
                          const DispatchTerms& dispatch, const StageShape& shape) const;
  void OptionStageTerms(bool a2a_overlap, const FamilyTerms& family, const LayerTerms& layers,
                        const DispatchTerms& dispatch, const StageShape& shape, StageTerms* t) const;
  void FsdpStageTerms(bool fsdp, const DispatchTerms& dispatch, const StageShape& shape, StageTerms* t) const;
  MemoryBreakdown Build(const Layout& layout, const FamilyTerms& family, const LayerTerms& layers,
                        const DispatchTerms& dispatch, int stage, const StageTerms& t) const;
  LayerBytes Layer(const Layout& layout, bool moe_layer, Recompute recompute) const;
  double ExpertLoad(const Layout& layout) const;  // busiest expert rank's rows / mean

  uint64_t id_;  // one per model constructed (copies share it): FamilyPeakMemo's key
  ModelSpec model_;
  JobSpec job_;
  double hbm_gib_;
  bool blackwell_ = false;   // cluster.gpu.architecture: FP8 GEMMs read any operand layout
  int nvlink_domain_gpus_ = 8;
  MemoryAssumptions a_;

  // Parameter elements per layer and per rank, split by sharding.
  RankParamCounter params_;
  // FP8 GEMMs per layer outside the routed experts (fp8 scaling state).
  double attention_gemms_ = 0, dense_mlp_gemms_ = 0, shared_gemms_ = 0;

  // Activation elements per token row (T = mbs S / (cp tp) rows per rank);
  // Layer() turns them into bytes for a layout's precision and recompute.
  bool mla_ = false;
  double q_ = 0, k_ = 0, v_ = 0, o_ = 0;  // per-row widths of q, k, v (after rotary), attention output
  double qk_norm_inputs_ = 0;             // q/k norm inputs (q + k when qk_norm)
  double latents_ = 0;                    // MLA: q_lora + kv_lora (each latent norm's input or output)
  double mlp_fc1_out_ = 0, mlp_fc2_in_ = 0;        // dense MLP: activation input (2F SwiGLU, F GELU), fc2 input F
  double shared_fc1_out_ = 0, shared_fc2_in_ = 0;  // shared experts, the same for F_s
  double expert_fc1_out_ = 0, expert_fc2_in_ = 0;  // one routed expert, before / ETP
};

// One-shot: MemoryModel(ctx).Estimate(layout).
MemoryBreakdown EstimateMemory(const Layout& layout, const CostContext& ctx);

// The HBM `foldplan plan` keeps free by default: --headroom-gib's value
// when neither it nor --max-mem-gib is given (--headroom-gib 0 turns it
// off). Not a margin inside the model (its peak above hides none): a limit
// on that peak, for what the model leaves out and what grows a real run's
// peak past it (doc/cost-model-memory.md, "The default headroom"):
//  - allocator fragmentation past the modelled 10% of the short-lived
//    allocations: 10-20% is reported for MoE training without
//    expandable_segments, and the short-lived allocations are about two
//    thirds of the peak of a layout that fills the GPU (the worked example:
//    48.5 of 74.6 GiB), so each 1% more fragmentation is about 0.65% of the
//    peak;
//  - buffers not modelled: NCCL's NVLS (NVLink SHARP) and internal scratch
//    buffers, TP overlap's userbuffers (a few mbs x S x H x 2 B per GEMM
//    kind: 112 MiB each for DeepSeek-V3 at S 4096, mbs 2), NVSHMEM's own
//    memory beside DeepEP's buffers;
//  - the CUDA context's growth past the 0.6 GiB assumed (kernels loaded
//    lazily as they are first run, CUDA graphs' private pools).
// 5% of HBM: 3.98 GiB of an H100's 79.6 GiB, which holds about 1.5 GiB of
// the fixed items above and fragmentation of about 15% instead of 10% (the
// middle of the reported range: 5% x 0.65 x 75 GiB = 2.4 GiB); 9.3 GiB of
// a GB200's 185.2. A fraction of HBM rather than a fixed amount because
// the largest item, fragmentation, grows with what a layout allocates,
// which grows with the GPU's memory. A working assumption, not a
// measurement.
inline constexpr double kDefaultHeadroomFraction = 0.05;
inline double DefaultHeadroomGib(double hbm_gib) { return kDefaultHeadroomFraction * hbm_gib; }

}  // namespace foldplan
