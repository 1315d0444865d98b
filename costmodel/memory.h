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
#include <string>
#include <string_view>
#include <vector>

#include "costmodel/cost_context.h"
#include "planner/layout.h"
#include "planner/pipeline.h"

namespace foldplan {

inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;  // 2^30
inline constexpr double kBytesPerMiB = 1024.0 * 1024.0;

// Term names, in the order MemoryBreakdown::terms lists them.
namespace memory_term {
inline constexpr const char* kParameters = "parameters";
inline constexpr const char* kFp8WeightCopies = "fp8 weight copies";
inline constexpr const char* kGradients = "gradients";
inline constexpr const char* kOptimizerStates = "optimizer states";
inline constexpr const char* kActivations = "activations";
inline constexpr const char* kRecomputeWorkingSet = "recompute working set";
inline constexpr const char* kEmbeddingActivations = "embedding activations";
inline constexpr const char* kOutputLogits = "output logits";
inline constexpr const char* kDispatchBuffers = "all-to-all dispatch buffers";
inline constexpr const char* kNcclBuffers = "NCCL buffers";
inline constexpr const char* kOptimizerBuckets = "optimizer buckets";
inline constexpr const char* kCudaContext = "CUDA context";
inline constexpr const char* kFragmentation = "allocator fragmentation";
}  // namespace memory_term
inline constexpr int kMemoryTermCount = 13;

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
};

// Parameter elements held by one rank of a pipeline stage.
struct StageParams {
  double dense = 0;   // non-expert: attention, norms, dense MLP, router, shared experts,
                      // embeddings and output layer where the stage holds them
  double expert = 0;  // routed-expert weights
  double gemm = 0;    // weights that fp8 GEMMs cast (decoder linears, experts included)
  double total() const { return dense + expert; }
};

// Holds pointers to the model and job it was built from: they must outlive it.
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
  // Bytes one decoder layer keeps for backward, per micro-batch, on one rank.
  double LayerActivationBytes(const Layout& layout, bool moe_layer, Recompute recompute) const;
  StageParams ParamsOnStage(const Layout& layout, int stage) const;
  StageParams ParamsOnStage(const Layout& layout, const PipelineDescription& pipeline, int stage) const;

  const MemoryAssumptions& assumptions() const { return a_; }

 private:
  struct LayoutTerms;  // what every stage of a layout shares
  struct StageTerms;   // the terms of one stage, as plain doubles

  LayoutTerms ComputeLayout(const Layout& layout) const;
  StageTerms ComputeStage(const Layout& layout, const LayoutTerms& shared, int stage,
                          const PipelineRank& held) const;
  StageParams ParamsFor(const Layout& layout, const PipelineRank& held) const;
  MemoryBreakdown Build(const Layout& layout, const LayoutTerms& shared, int stage,
                        const StageTerms& t) const;
  double ExpertLoad(const Layout& layout) const;  // busiest expert rank's rows / mean

  const ModelSpec* model_;
  const JobSpec* job_;
  double hbm_gib_;
  MemoryAssumptions a_;

  // Parameter elements per layer, split by sharding (from ModelSpec::layer_params).
  double dense_layer_tp_ = 0, dense_layer_replicated_ = 0;  // dense layers
  double moe_layer_tp_ = 0, moe_layer_replicated_ = 0;      // MoE layers, outside routed experts
  double moe_layer_experts_ = 0;                            // all routed experts of one layer
  double layer_gemm_replicated_ = 0;  // replicated weights that fp8 GEMMs cast (MLA down-proj.)
  EmbeddingParams embeddings_;

  // Activation bytes per token row (T = mbs S / (cp tp) rows per rank).
  double attention_row_bytes_ = 0;   // attention outside the core
  double core_row_bytes_ = 0;        // flash: fp32 log-sum-exp per head
  double core_square_bytes_ = 0;     // non-flash: bytes per element of the a x s x s scores
  double dense_mlp_row_bytes_ = 0;
  double moe_row_bytes_ = 0;         // MoE block per source token (norm, router, shared, combine)
  double expert_row_hidden_bytes_ = 0;  // per expert row: fc1 input (H)
  double expert_row_ffn_bytes_ = 0;     // per expert row: fc1 output + fc2 input, before / ETP
};

// One-shot: MemoryModel(ctx).Estimate(layout).
MemoryBreakdown EstimateMemory(const Layout& layout, const CostContext& ctx);

}  // namespace foldplan
