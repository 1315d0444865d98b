// One layout's cost, end to end. CostModel holds what every evaluation of
// one (cluster, model, job) shares; CostScorer plugs it into the planner's
// search. A step is
//   stage work (stage_work.h: the pipeline description, compute_time.h's
//     per-layer compute, comm_plan.h's communication)
//   -> the pipeline schedule (schedule.h: per-rank time, bubble, pipeline)
//   -> the exposed part of data-parallel traffic (schedule.h)
//   -> + the optimizer step (compute_time.h),
// and memory (memory.h) is the worst stage's peak. doc/cost-model.md
// derives the step time; tokens/s = global_batch x seq / step; MFU = model
// FLOPs per token (flops.h ModelFlopsPerToken) x tokens/s / (world x dense
// bf16 peak).
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "costmodel/comm_params.h"
#include "costmodel/compute_profile.h"
#include "costmodel/cost_context.h"
#include "costmodel/memory.h"
#include "costmodel/stage_work.h"
#include "planner/legality.h"
#include "planner/pipeline.h"
#include "planner/scoring.h"
#include "topology/topology.h"

namespace foldplan {

struct PipelineTimes;  // costmodel/schedule.h

// Communication of one kind over a step on the slowest stage.
struct CommKindCost {
  std::string name;      // "tp_allgather", "ulysses_alltoall", "ep_dispatch", ...
  double total_s = 0;    // time the collectives take
  double exposed_s = 0;  // of which not hidden behind compute
};

struct StepBreakdown {
  long long microbatches = 0;     // m
  int slowest_stage = 0;          // pipeline rank with t_max
  double stage_compute_s = 0;     // per micro-batch on that stage
  double stage_exposed_comm_s = 0;
  // The host on that stage, per micro-batch (host_time.h): its launches,
  // its syncs, the time it spends issuing them and what of it the GPU
  // waits for (launches beyond a pass's GPU time, idle after each sync).
  double stage_host_s = 0;
  double stage_host_exposed_s = 0;
  double stage_launches = 0;
  double stage_syncs = 0;
  double stage_time_s = 0;        // t_max
  double pipeline_s = 0;          // m t_max + bubble
  double bubble_s = 0;            // (pp-1)/vpp t_max (+ (pp-1) s interleaved, s = one crossing)
  double dp_exposed_s = 0;        // gradient reduce-scatter + parameter all-gather not hidden
  double optimizer_s = 0;
  double host_step_s = 0;         // the step's own host syncs (gradient norm, loss report)
  double step_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;                 // against the GPU's dense bf16 peak
  // Model FLOPs per step / step time / GPUs, in 10^12 FLOP/s: what
  // Megatron's logs print per GPU (the FLOP count MFU uses).
  double tflops_per_gpu = 0;
  // MFU against the dense peak of the layout's precision: the fp8 peak for
  // an FP8 recipe (when the GPU has one), else the bf16 peak (equals mfu).
  double mfu_precision_peak = 0;
  double model_flops_per_token = 0;  // causal attention counted under the mask (the default)
  // The same with attention counted without the causal halving, as
  // Megatron did before core v0.12 (published MFU tables of early 2025).
  double model_flops_per_token_full_attention = 0;
  double mfu_full_attention = 0;
};

// The host on one pipeline rank, per micro-batch (host_time.h).
struct StageHost {
  double host_s = 0;     // issuing its passes' launches
  double exposed_s = 0;  // what of it, and of its syncs, the GPU waits for
  double launches = 0;
  double syncs = 0;
};

struct Evaluation {
  Layout layout;                        // stage_layers filled
  PipelineDescription pipeline;         // what each virtual stage holds
  bool pipeline_chosen = false;         // the planner chose the layout (the layers do not divide)
  std::vector<Violation> violations;    // legality; empty when legal
  StepBreakdown step;
  MemoryBreakdown memory;
  std::vector<CommKindCost> comm;       // every kind the layout uses
  std::vector<StageHost> host;          // per pipeline rank
};

class CostModel {
 public:
  // Loads the compute profile (data/compute/h200.json, scaled to the
  // cluster's GPU), the calibration (the cluster's file, else defaults from
  // line rates and NCCL's model) and builds the topology.
  // `use` says whether a calibration made on another GPU is accepted.
  static Result<std::unique_ptr<CostModel>> Create(const ClusterSpec& cluster,
                                                   const ModelSpec& model, const JobSpec& job,
                                                   const CalibrationUse& use = {});
  // Its context and memory model point into its own members: a copy would
  // point into the original.
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  // Full evaluation (for reports). Illegal layouts are evaluated as far as
  // their degrees allow, with their violations listed.
  Evaluation Evaluate(const Layout& layout) const;
  // Only what the search needs; allocates little. Memoises per thread
  // (bounded): the placement of each group kind, each layer's compute times
  // per compute key, each collective's time per placement (the caches'
  // headers state their keys). Bit-identical to ScoreReference, and its
  // step time and peak memory to Evaluate's step.step_time_s and
  // memory.peak_gib() (tests/costmodel_score_cache_test.cc).
  //
  // With `prune_above` (LayoutScorer::ScoreBounded): when the objective is
  // proven > prune_above, the score comes back `pruned` (fits and peak
  // exact; step time and objective 0, not computed): with the memory
  // objective when the peak exceeds it, with throughput when
  // StepTimeLowerBound does (then no placement or communication plan is
  // built). Otherwise the result is the unbounded one, bit for bit.
  static constexpr double kNoPruning = std::numeric_limits<double>::infinity();
  LayoutScore Score(const Layout& layout, bool minimise_memory, double prune_above = kNoPruning) const;
  // The same without any cache: every placement, collective and compute
  // time computed afresh. The reference the tests hold Score to.
  LayoutScore ScoreReference(const Layout& layout, bool minimise_memory) const;
  // Score of every member of a family (LayoutScorer::ScoreFamily), each
  // under the sink's bound at the time, bit for bit Score's, sharing the
  // pipeline, each variant's peak and each compute key's step-time bound.
  // It prunes more than Score: also by StepTimeLowerBoundWithComm, the
  // bound with communication, once the member's arrangement is placed.
  void ScoreFamily(const LayoutFamily& family, bool minimise_memory, ScoreSink& sink) const;
  // A lower bound on the layout's step time, bit for bit <= Score's
  // step_time_s: m x the slowest stage's compute + the least bubble it
  // allows (schedule_bound.h PipelineLowerBound), from the compute times alone.
  // The throughput objective prunes by it. Uncached (for tests).
  double StepTimeLowerBound(const Layout& layout) const;
  // A lower bound on the step time with communication, <= Score's
  // step_time_s: schedule_bound.h PipelineLowerBound of the layout's compute with
  // the CommSecondsOf of its CommFloorVariant's plan (comm_plan.h) as the
  // floor. ScoreFamily prunes by it, bit for bit this value. Uncached (for
  // tests).
  double StepTimeLowerBoundWithComm(const Layout& layout) const;
  // A lower bound on StepTimeLowerBound of every layout that differs from
  // `layout` only in its recompute set, order, placement, overlaps and
  // FSDP, and in its dispatcher and precision within `dispatchers` (bit d:
  // Dispatcher d) and `precisions` (bit p: Precision p): schedule_bound.h
  // LeastPipelineLowerBound of the LeastBlocks of those computes, timed at
  // dp 1 (the most micro-batches per step: the least FP8 weight-cast share,
  // so that the blocks serve every dp) and built on the layout's pipeline
  // and micro-batches.
  // ScoreFamily prunes a family's fitting variants by it at once.
  // `cached`: through the per-thread memos ScoreFamily uses
  // (LeastBlocksMemo in evaluate_memo.cc), else afresh; the same bits.
  double FamilyStepTimeLowerBound(const Layout& layout, uint32_t dispatchers, uint32_t precisions,
                                  bool cached = false) const;

  // What each block kind costs, for choosing pipeline layouts
  // (planner/pipeline.h): forward + backward seconds of one sequence on one
  // GPU (tp = cp = ep = 1, mbs 1, the job's first precision, no recompute).
  const BlockWeights& pipeline_weights() const { return weights_; }
  // The legality context of this model's inputs, with its block weights.
  LegalityContext legality() const { return {&cluster_, &model_, &job_, &weights_}; }

  // The step's work per pipeline rank (stage_work.h), as Evaluate costs it:
  // what a step simulator plays out. It points to `pipeline`: keep that
  // alive while the work is used.
  StepWork Work(const Layout& layout, const PipelineDescription& pipeline) const;
  StepWork Work(const Layout& layout, const PipelineDescription&& pipeline) const = delete;
  // The optimizer step's seconds on pipeline rank `stage` (the step adds
  // the slowest stage's).
  double OptimizerSeconds(const Layout& layout, const PipelineDescription& pipeline, int stage) const;

  const CostContext& context() const { return ctx_; }
  const MemoryModel& memory() const { return memory_; }
  const ComputeProfile& profile() const { return profile_; }
  const CommParams& comm_params() const { return comm_; }

 private:
  CostModel(const ClusterSpec& cluster, const ModelSpec& model, const JobSpec& job,
            Topology topology, ComputeProfile profile, CommParams comm);
  StepBreakdown Step(const Layout& layout, const PipelineDescription& pipeline,
                     std::vector<CommKindCost>* comm, bool cached, std::vector<StageHost>* host = nullptr) const;
  StepBreakdown StepOf(const Layout& layout, const PipelineDescription& pipeline, const StepWork& work,
                       std::vector<CommKindCost>* comm, std::vector<StageHost>* host = nullptr) const;
  // StepOf past the schedule: `times` is SchedulePipeline's of `work`.
  StepBreakdown StepAfter(const Layout& layout, const PipelineDescription& pipeline, const StepWork& work,
                          const PipelineTimes& times) const;
  StepWork WorkOf(const Layout& layout, const PipelineDescription& pipeline, bool cached) const;
  // WorkOf in two parts: the compute (no ops, no host yet), then the comm
  // plan.
  StepWork ComputeWorkOf(const Layout& layout, const PipelineDescription& pipeline, bool cached) const;
  void ComputeWorkOf(const Layout& layout, const PipelineDescription& pipeline, bool cached, StepWork* out) const;
  void AddCommOf(const Layout& layout, const PipelineDescription& pipeline, bool cached, StepWork* work) const;
  // Fits and the peak, from the worst stage's peak bytes.
  LayoutScore PeakScore(double peak_bytes) const;

  // The search's accelerators. Each `cached` above reads through the
  // per-thread memos (evaluate_memo.h) when true, else computes afresh: the
  // same bits. These live in evaluate_memo.cc and search_score.cc.
  //
  // HostWorkOf(layout), through the per-thread memo when `cached` (the
  // same bits); valid until the thread's next call.
  const HostWork& HostOf(const Layout& layout, bool cached) const;
  // A layout's compute work (ComputeWorkOf: no communication yet) and its
  // PipelineLowerBound, as ScoreFamily shares them across members. FinishScore
  // reads each member's plan beside it (work.ops is not the member's).
  struct ComputedWork {
    StepWork work;
    double bound_s = 0;  // set whenever FinishScore is given a finite bound with it
  };
  // Score past the peak: for a layout that fits, the objective (or
  // pruned), through the memos, from its compute work and bound when
  // given, and its plan from `plan_without_recompute` when given: the
  // layout's plan on its placement without recomputation (SumPlan counts
  // the layout's recompute calls in).
  LayoutScore FinishScore(const Layout& layout, const PipelineDescription& pipeline, LayoutScore peak,
                          bool minimise_memory, double prune_above, ComputedWork* computed = nullptr,
                          const std::vector<CommOp>* plan_without_recompute = nullptr) const;
  // The LeastBlocks of the computes FamilyStepTimeLowerBound covers;
  // `cached`: through the per-thread memos, else afresh (the same bits).
  LeastBlocks LeastBlocksOf(const Layout& layout, uint32_t dispatchers, uint32_t precisions, bool cached) const;
  // DescribePipeline, memoised per thread (PipelineMemo in evaluate_memo.cc).
  const PipelineDescription& CachedPipeline(const Layout& layout) const;
  // The layout's group placement, kept per thread (PlacementCache in
  // evaluate_memo.cc), null when PlaceGroups refuses it, and the timings
  // memo that goes with it.
  const LayoutPlacement* PlacementOf(const Layout& layout, CollectiveTimeMemo** memo) const;
  // BuildCommPlan(layout, ctx_, placement, pipeline, memo, ops), bit for
  // bit, `placement` and `memo` PlacementOf(layout)'s: its per-layer ops
  // (BuildLayerCommOps) and step ops (AddStepCommOps) taken from an earlier
  // layout of the search run placed alike that they read the same of.
  void CommPlanOf(const Layout& layout, const LayoutPlacement& placement, const PipelineDescription& pipeline,
                  CollectiveTimeMemo* memo, std::vector<CommOp>* ops) const;

  ClusterSpec cluster_;
  ModelSpec model_;
  JobSpec job_;
  Topology topology_;
  ComputeProfile profile_;
  CommParams comm_;
  RankParamCounter rank_params_;  // of model_, counted once for every plan
  CostContext ctx_;
  MemoryModel memory_;
  BlockWeights weights_;
  // Model FLOPs per token (flops.h), causal and full attention: they depend
  // on the model and the sequence length only.
  double model_flops_per_token_ = 0;
  double model_flops_per_token_full_attention_ = 0;
  uint64_t id_;  // tells per-thread caches which model they hold data of
  static std::atomic<uint64_t> next_id_;
};

enum class Objective { kThroughput, kMemory };
const char* Name(Objective objective);  // "throughput", "memory"

class CostScorer : public LayoutScorer {
 public:
  CostScorer(const CostModel& model, Objective objective) : model_(model), objective_(objective) {}
  // Keeps a reference to the model: a temporary would dangle.
  CostScorer(const CostModel&&, Objective) = delete;
  LayoutScore Score(const Layout& layout) const override {
    return model_.Score(layout, objective_ == Objective::kMemory);
  }
  LayoutScore ScoreBounded(const Layout& layout, double prune_above) const override {
    return model_.Score(layout, objective_ == Objective::kMemory, prune_above);
  }
  void ScoreFamily(const LayoutFamily& family, ScoreSink& sink) const override {
    model_.ScoreFamily(family, objective_ == Objective::kMemory, sink);
  }

 private:
  const CostModel& model_;
  Objective objective_;
};

}  // namespace foldplan
