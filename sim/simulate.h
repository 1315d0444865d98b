// One training step of a layout, simulated: the cost model's work per
// pipeline rank (CostModel::Work) played out in the schedule's order of
// passes (sim/pipeline_order.h) as a task graph (sim/step_graph.h) by the
// event loop (sim/engine.h), with the analytical evaluation beside it.
//
// Every overlap is an explicit option; unset, it is what the layout's
// recipe gives the cost model:
//   tp  TP ops beside their block: the comm plan marks them overlappable (--tp-comm-overlap)
//   cp  CP ops beside their block: ring attention's KV exchange
//   ep  a forward's and another micro-batch's backward's all-to-alls beside
//       each other's compute: --overlap-moe-expert-parallel-comm; DualPipeV's pairs always
//   dp  gradient reduce-scatters and parameter all-gathers bucketed (the
//       distributed optimizer's overlap); FSDP's per-layer ops beside their block
//   pp  pipeline sends beside compute: interleaved (overlap_p2p_comm) and DualPipeV;
//       1F1B, GPipe and ZB-H1 block on them
//   shared  shared experts on a side stream beside the token dispatch
//       (--moe-shared-expert-overlap): off, as no layout key sets it
//   host  the host runs ahead of the GPU, launching as it can and waiting
//       at syncs: on; off, each block takes max(its host, its GPU time)
//       and then its syncs, as the analytical model counts it
// With every overlap off, balanced routing and the cost model's collective
// times, a 1F1B or interleaved step differs from the analytical one only
// where the analytical formula simplifies (doc/simulator.md "Against the
// analytical model"): its fill and drain count every stage at the slowest
// stage's time and every rank a stage crossing each way.
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "costmodel/evaluate.h"
#include "planner/layout.h"
#include "inputs/pipeline_schedule.h"
#include "sim/engine.h"
#include "sim/pipeline_order.h"
#include "sim/sim_estimate.h"
#include "sim/step_graph.h"

namespace foldplan {

struct OverlapOptions {
  std::optional<bool> tp, cp, ep, dp, pp;  // unset: the recipe's (above)
  std::optional<bool> shared;               // shared experts beside the dispatch; unset: off
  std::optional<bool> host;                 // the host runs ahead of the GPU (step_graph.h); unset: on
};

struct SimOptions {
  std::optional<PipelineSchedule> schedule;  // unset: the layout's (schedule=, else the one vpp implies)
  OverlapOptions overlap;
  // Routing imbalance (sim/expert_loads.h); unbalanced loads simulate every
  // rank (the whole path), balanced ones one per pipeline rank unless
  // `whole` asks for every rank anyway.
  LoadSpec imbalance;
  uint64_t seed = 0;
  bool whole = false;
  // Whether every rank is simulated (the whole path), else one per pipeline rank.
  bool every_rank() const { return whole || !imbalance.balanced(); }
  // Concurrent communication on a rank shares its NVLink port and NIC
  // max-min fairly (sim/engine.h); false: every op takes the cost model's
  // seconds whatever runs beside it.
  bool share_links = true;
  // The run is refused (before anything grows) when its estimate
  // (sim/sim_estimate.h) needs more task slots than this.
  long long max_task_slots = kDefaultMaxSimTaskSlots;
  bool trace = false;  // the trace will be written: counted in the estimate's bytes
  // Called as the run goes: "building" with the share of pipeline stages
  // built, then "running" with the share of tasks ended (every 2^16
  // events); unset: nothing.
  std::function<void(const char* phase, double share)> progress;
};

struct SimRankStats {
  int rank = 0;           // the simulated rank: the global rank on the whole path, else the pipeline rank
  int pipeline_rank = 0;
  double busy_s = 0;     // something runs on the rank (compute or communication)
  double idle_s = 0;     // step time - busy
  double compute_s = 0;  // compute runs
  // Communication while no compute runs (time two kinds share is split
  // between them), and every communication task's time, by SimKind.
  std::array<double, kSimKindCount> exposed_s{};
  std::array<double, kSimKindCount> comm_s{};
  double pipeline_idle_s = 0;  // idle while the pipeline runs (its bubble)
  // Memory: the memory model's static terms plus the activations of the
  // chunks in flight; the peak, when it is first reached, and the memory
  // model's peak for the same rank.
  double peak_memory_bytes = 0;
  double peak_memory_at_s = 0;
  // With imbalance: the rank's expert rows over the costed ones, the mean
  // over its MoE layers and micro-batches (1: balanced, or no MoE layer).
  double received_over_costed = 1;
  double model_peak_memory_bytes = 0;
  double peak_inflight_microbatches = 0;  // in whole-stage equivalents
  double model_inflight_microbatches = 0;
  std::vector<std::pair<double, double>> memory_timeline;  // (seconds, bytes), at each change
};

// A stretch of the critical path: consecutive tasks on one rank of one pass
// of one micro-batch (the step's data-parallel and optimizer work: pass
// kStep, micro-batch -1), with its time by kind.
struct CriticalSegment {
  int rank = 0;  // simulated rank (SimRankStats::rank); a collective counts as its first member's
  SimPass pass = SimPass::kStep;
  int microbatch = -1;
  int chunk = -1;
  double start_s = 0;
  double duration_s = 0;
  std::array<double, kSimKindCount> by_kind_s{};
  int tasks = 0;
};

struct SimResult {
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  OverlapSet overlap;
  double step_time_s = 0;
  double pipeline_start_s = 0;  // the first pass's start (after a blocking parameter gather)
  double pipeline_s = 0;      // from the first pass's start to the last pass's end
  double dp_exposed_s = 0;    // the rest of the step but the optimizer: data-parallel traffic outside the pipeline
  double optimizer_s = 0;     // the slowest rank's optimizer step
  double host_step_s = 0;     // the step's own host syncs, after the optimizer
  double bubble_fraction = 0; // idle share of ranks x pipeline_s
  double tokens_per_s = 0;
  double mfu = 0;
  bool whole = false;                          // every rank simulated (else one per pipeline rank)
  bool loads_drawn = false;                    // imbalanced loads drawn (memory per rank follows them)
  std::vector<SimRankStats> ranks;             // per simulated rank
  std::vector<CriticalSegment> critical_path;  // in time order
  std::array<double, kSimKindCount> critical_s{};  // the critical path's time by kind
  uint64_t tasks = 0;
  uint64_t events = 0;
  uint64_t slowed_by_links = 0;  // communication tasks the shared links made longer
  bool share_links = false;
  Evaluation analytical;  // the cost model's evaluation of the same layout
  StepGraph graph;        // what ran, for the trace
  EngineRun run;
};

// Simulates one step of `layout` (legal or not: an illegal layout is
// simulated as far as its degrees allow, like Evaluate). Errors: a schedule
// the degrees cannot run (sim/pipeline_order.h says why).
Result<SimResult> Simulate(const CostModel& model, const Layout& layout, const SimOptions& options = {});

// What Simulate(model, layout, options) would build, estimated without
// building it (sim/sim_estimate.h). Errors: those of Simulate's schedule.
Result<SimEstimate> EstimateSimulation(const CostModel& model, const Layout& layout, const SimOptions& options = {});

// The step of hand-made or cost-model work in `order`: everything above but
// the analytical evaluation, the memory timelines, tokens/s and MFU.
// `optimizer_s` per pipeline rank (missing ranks: none).
// `ranks` (and `loads`): the whole path (sim/step_graph.h).
Result<SimResult> SimulateWork(const StepWork& work, const ModelSpec& model, const PipelineOrder& order,
                               const OverlapSet& overlap, const std::vector<double>& optimizer_s,
                               const RankMap* ranks = nullptr, const ExpertLoadDraw* loads = nullptr,
                               bool share_links = false,
                               const std::function<void(const char*, double)>& progress = {});

// The overlaps `options` resolve to under `schedule`.
OverlapSet ResolveOverlap(const OverlapOptions& options, PipelineSchedule schedule);

}  // namespace foldplan
