#include "costmodel/evaluate.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include "core/json_check.h"
#include "core/mix64.h"
#include "costmodel/collective_time_memo.h"
#include "costmodel/comm_plan.h"
#include "costmodel/evaluate_memo.h"
#include "costmodel/compute_calibration.h"
#include "costmodel/compute_time.h"
#include "costmodel/compute_time_memo.h"
#include "costmodel/flops.h"
#include "costmodel/routing.h"
#include "planner/group_placement.h"
#include "costmodel/schedule.h"
#include "costmodel/schedule_bound.h"
#include "costmodel/stage_work.h"
#include "planner/pipeline.h"

namespace foldplan {
namespace {

// Accumulates per-kind totals for reports (null when only scoring).
class CommTally {
 public:
  explicit CommTally(std::vector<CommKindCost>* out) : out_(out) {}
  void Add(const char* name, double total_s, double exposed_s) {
    if (!out_) return;
    auto it = index_.find(name);
    if (it == index_.end()) {
      it = index_.emplace(name, out_->size()).first;
      out_->push_back({name, 0, 0});
    }
    (*out_)[it->second].total_s += total_s;
    (*out_)[it->second].exposed_s += exposed_s;
  }

 private:
  std::vector<CommKindCost>* out_;
  std::map<std::string, size_t> index_;
};

// Per-kind totals on the slowest rank over the whole step, for reports,
// with the exposure the schedule attributes to each op (the pipeline
// bubble's crossings are in the bubble, the data-parallel exposure apart).
void TallyComm(const StepWork& work, const PipelineTimes& times, const std::vector<double>& op_exposed,
               double dp_exposed_s, std::vector<CommKindCost>* out) {
  CommTally tally(out);
  const RankWork& r = work.ranks[static_cast<size_t>(times.slowest)];
  const double m = static_cast<double>(work.microbatches);
  for (size_t i = 0; i < work.ops.size(); ++i) {
    const CommOp& op = work.ops[i];
    const double per_microbatch = op.seconds_per_microbatch();
    double per_step = 0;
    if (op.scope == CommOp::kPerStep) {
      per_step = per_microbatch;
    } else if (op.scope == CommOp::kPerStageBoundary) {
      per_step = per_microbatch * r.boundary_crossings * m;
    } else {
      int blocks = 0;
      for (BlockKind kind : kAllBlockKinds) {
        if (work.Runs(op, kind)) blocks += r.count(kind);
      }
      per_step = per_microbatch * blocks * m;
    }
    if (per_step <= 0) continue;
    tally.Add(op.name, per_step, i < op_exposed.size() ? op_exposed[i] * m : 0);
  }
  if (dp_exposed_s > 0) tally.Add("data-parallel (exposed part)", 0, dp_exposed_s);
}

}  // namespace

namespace {

// The communication parameters and the compute rates of the cluster's
// calibration file, read once: its comm model (GPU checked first), and the
// shipped profile scaled to the cluster's GPU with the file's measured
// points (its v2 "compute" section) merged in. No file: the defaults.
struct Rates {
  CommParams comm;
  ComputeProfile profile;
};
Result<Rates> RatesFor(const ClusterSpec& cluster, const ComputeProfile& shipped, const CalibrationUse& use) {
  if (cluster.calibration.empty()) return Rates{DefaultCommParams(cluster), shipped.ScaledTo(cluster.gpu)};
  Result<nlohmann::json> file = ParseJsonFile(cluster.calibration);
  if (!file.ok()) return file.status();
  auto comm = ParseCommParams(file.value(), cluster.calibration, cluster, use);
  if (!comm.ok()) return comm.status();
  const auto section = file.value().find("compute");
  if (section == file.value().end()) return Rates{std::move(comm).value(), shipped.ScaledTo(cluster.gpu)};
  auto profile = CalibratedComputeProfile(shipped, *section, cluster.calibration, cluster.gpu);
  if (!profile.ok()) return profile.status();
  return Rates{std::move(comm).value(), std::move(profile).value()};
}

}  // namespace

Result<std::unique_ptr<CostModel>> CostModel::Create(const ClusterSpec& cluster, const ModelSpec& model,
                                                     const JobSpec& job, const CalibrationUse& use) {
  auto topology = Topology::Build(cluster);
  if (!topology.ok()) return topology.status();
  auto profile = ComputeProfile::Load(ComputeProfile::DefaultPath());
  if (!profile.ok()) return profile.status();
  auto rates = RatesFor(cluster, profile.value(), use);
  if (!rates.ok()) return rates.status();
  return std::unique_ptr<CostModel>(new CostModel(cluster, model, job, std::move(topology).value(),
                                                  std::move(rates.value().profile), std::move(rates.value().comm)));
}

CostModel::CostModel(const ClusterSpec& cluster, const ModelSpec& model, const JobSpec& job,
                     Topology topology, ComputeProfile profile, CommParams comm)
    : cluster_(cluster),
      model_(model),
      job_(job),
      topology_(std::move(topology)),
      profile_(std::move(profile)),
      comm_(std::move(comm)),
      rank_params_(model_),
      ctx_{&cluster_, &model_, &job_, &topology_, &profile_, &comm_, &rank_params_},
      memory_(ctx_),
      model_flops_per_token_(ModelFlopsPerToken(model_, job_.seq_len)),
      model_flops_per_token_full_attention_(ModelFlopsPerTokenFullAttention(model_, job_.seq_len)),
      id_(next_id_.fetch_add(1) + 1) {
  Layout one;
  one.world = 1;
  one.precision = job_.precisions.front();
  const ComputeTimes t = ComputeLayerTimes(one, ctx_);
  // Forward + backward of each block (nothing is recomputed here).
  auto seconds = [](const BlockCost& block) { return block.forward_s + block.backward_s; };
  weights_.dense_layer = seconds(LayerBlockCost(t.dense_layer));
  weights_.moe_layer = model_.is_moe() ? seconds(LayerBlockCost(t.moe_layer)) : weights_.dense_layer;
  weights_.embedding = seconds(PartBlockCost(t.embedding));
  weights_.loss = seconds(PartBlockCost(t.output_layer));
  const MtpBlockParts mtp = MtpBlockPartsOf(t, model_.mtp_layer_is_moe());
  weights_.mtp_layer = seconds(mtp.projection) + seconds(mtp.layer) + seconds(mtp.output);
}

std::atomic<uint64_t> CostModel::next_id_{0};

StepWork CostModel::Work(const Layout& layout, const PipelineDescription& pipeline) const {
  return WorkOf(layout, pipeline, true);
}

StepWork CostModel::WorkOf(const Layout& layout, const PipelineDescription& pipeline, bool cached) const {
  StepWork work = ComputeWorkOf(layout, pipeline, cached);
  work.host = HostOf(layout, cached);
  AddCommOf(layout, pipeline, cached, &work);
  return work;
}

void CostModel::AddCommOf(const Layout& layout, const PipelineDescription& pipeline, bool cached,
                          StepWork* work) const {
  work->ops.clear();  // a layout that cannot be placed has no plan, whatever the work held
  if (cached) {
    CollectiveTimeMemo* memo = nullptr;
    if (const LayoutPlacement* placement = PlacementOf(layout, &memo)) {
      CommPlanOf(layout, *placement, pipeline, memo, &work->ops);
    }
  } else if (const Result<LayoutPlacement> placement = PlaceGroups(layout, topology_); placement.ok()) {
    work->ops = BuildCommPlan(layout, ctx_, *placement, pipeline);
  }
}

StepWork CostModel::ComputeWorkOf(const Layout& layout, const PipelineDescription& pipeline, bool cached) const {
  StepWork work;
  ComputeWorkOf(layout, pipeline, cached, &work);
  return work;
}

void CostModel::ComputeWorkOf(const Layout& layout, const PipelineDescription& pipeline, bool cached,
                              StepWork* out) const {
  // Compute times per thread (ComputeTimesCache), for this model only; no
  // ComputeTimes built on that path (zeroing one costs ~1.6 k instructions).
  const auto build = [&](const ComputeTimes& times) {
    BuildStepWork(layout, model_, cluster_.gpu, pipeline, times, MicroBatchesPerStep(job_, layout), out);
  };
  if (cached) {
    build(ThreadMemo<ComputeTimesCache>(id_).Get(layout, ctx_));
  } else {
    build(ComputeLayerTimes(layout, ctx_));
  }
  StepWork& work = *out;
  work.load_factor = ExpertLoadFactor(job_, layout.ep);
  work.nvlink_bytes_per_s = comm_.nvlink_gb_per_s() * 1e9;
  const double nic_share = double(comm_.nics_per_node) / std::max(1, cluster_.gpus_per_node);
  work.nic_bytes_per_s = comm_.network_gb_per_s() * 1e9 * nic_share;
  work.spine_bytes_per_s = comm_.spine_gb_per_s() * 1e9 * nic_share;
}

double CostModel::OptimizerSeconds(const Layout& layout, const PipelineDescription& pipeline, int stage) const {
  const StageParams params = memory_.ParamsOnStage(layout, pipeline, stage);
  // The distributed optimizer and FSDP both shard the optimizer states
  // over the gradient-reduction groups.
  const bool sharded = job_.distributed_optimizer || layout.fsdp;
  const double dense_shard = sharded ? double(layout.dp) * layout.cp : 1.0;
  const double expert_shard = sharded ? double(layout.edp) : 1.0;
  return OptimizerStepSeconds(params.dense / dense_shard + params.expert / expert_shard, profile_);
}

StepBreakdown CostModel::Step(const Layout& layout, const PipelineDescription& pipeline,
                              std::vector<CommKindCost>* comm_out, bool cached, std::vector<StageHost>* host) const {
  return StepOf(layout, pipeline, WorkOf(layout, pipeline, cached), comm_out, host);
}

StepBreakdown CostModel::StepOf(const Layout& layout, const PipelineDescription& pipeline, const StepWork& work,
                                std::vector<CommKindCost>* comm_out, std::vector<StageHost>* host) const {
  // Stage work -> schedule -> data-parallel exposure -> optimizer.
  std::vector<double> op_exposed;
  thread_local PipelineTimes times;  // its storage kept from step to step
  SchedulePipeline(work, &times, comm_out ? &op_exposed : nullptr);
  StepBreakdown s = StepAfter(layout, pipeline, work, times);
  if (comm_out) TallyComm(work, times, op_exposed, s.dp_exposed_s, comm_out);
  if (host) {
    host->clear();
    for (const RankTime& r : times.ranks) host->push_back({r.host_s, r.host_exposed_s, r.launches, r.syncs});
  }
  return s;
}

StepBreakdown CostModel::StepAfter(const Layout& layout, const PipelineDescription& pipeline, const StepWork& work,
                                   const PipelineTimes& times) const {
  StepBreakdown s;
  s.microbatches = MicroBatchesPerStep(job_, layout);
  const RankTime& worst = times.ranks[static_cast<size_t>(times.slowest)];
  s.slowest_stage = times.slowest;
  s.stage_compute_s = worst.compute_s;
  s.stage_exposed_comm_s = worst.exposed_comm_s + worst.boundary_s;
  s.stage_host_s = worst.host_s;
  s.stage_host_exposed_s = worst.host_exposed_s;
  s.stage_launches = worst.launches;
  s.stage_syncs = worst.syncs;
  s.stage_time_s = times.stage_time_s;
  s.bubble_s = times.bubble_s;
  s.pipeline_s = times.pipeline_s;
  s.dp_exposed_s = DataParallelExposure(work, times).exposed_s;

  s.optimizer_s = OptimizerSeconds(layout, pipeline, s.slowest_stage);

  s.host_step_s = work.host.step_syncs * work.host.sync_s;
  s.step_time_s = s.pipeline_s + s.dp_exposed_s + s.optimizer_s + s.host_step_s;
  s.tokens_per_s = double(job_.global_batch) * job_.seq_len / s.step_time_s;
  const double peak_flops = double(layout.world) * cluster_.gpu.peak_bf16_flops;
  s.model_flops_per_token = model_flops_per_token_;
  s.mfu = s.model_flops_per_token * s.tokens_per_s / peak_flops;
  s.tflops_per_gpu = s.model_flops_per_token * s.tokens_per_s / layout.world / 1e12;
  const bool fp8_peak = IsFp8(layout.precision) && cluster_.gpu.peak_fp8_flops > 0;
  s.mfu_precision_peak =
      fp8_peak ? s.model_flops_per_token * s.tokens_per_s / (double(layout.world) * cluster_.gpu.peak_fp8_flops) : s.mfu;
  s.model_flops_per_token_full_attention = model_flops_per_token_full_attention_;
  s.mfu_full_attention = s.model_flops_per_token_full_attention * s.tokens_per_s / peak_flops;
  return s;
}

Evaluation CostModel::Evaluate(const Layout& input) const {
  Evaluation e;
  e.layout = input;
  e.violations = CheckLayout(input, legality());
  e.pipeline = DescribePipeline(input, model_, &weights_);
  e.pipeline_chosen = !input.explicit_stages && NeedsChosenLayout(model_.layers, input.pp, input.vpp);
  // Explicit stages stay as given (a wrong count is among the violations);
  // otherwise the layout shows the split its costs assume.
  if (!e.layout.explicit_stages) e.layout.stage_layers = e.pipeline.StageLayers();
  e.step = Step(e.layout, e.pipeline, &e.comm, true, &e.host);
  e.memory = memory_.Estimate(e.layout, e.pipeline);
  return e;
}

// The score as the formulas give it: the peak of the worst stage, then for
// a layout that fits the step time of its whole work (compute, host and
// communication plan) through the schedule; nothing memoised or pruned.
LayoutScore CostModel::ScoreReference(const Layout& layout, bool minimise_memory) const {
  const PipelineDescription pipeline = DescribePipeline(layout, model_, &weights_);
  LayoutScore score = PeakScore(memory_.PeakBytes(layout, pipeline));
  if (!score.fits) return score;
  score.step_time_s = StepOf(layout, pipeline, WorkOf(layout, pipeline, false), nullptr).step_time_s;
  score.objective = minimise_memory ? score.peak_memory_gib : score.step_time_s;
  return score;
}

double CostModel::StepTimeLowerBound(const Layout& layout) const {
  const PipelineDescription pipeline = DescribePipeline(layout, model_, &weights_);
  return PipelineLowerBound(ComputeWorkOf(layout, pipeline, false));
}

double CostModel::StepTimeLowerBoundWithComm(const Layout& layout) const {
  const PipelineDescription pipeline = DescribePipeline(layout, model_, &weights_);
  Layout least = layout;
  LayoutFamily::SetVariant(CommFloorVariant(LayoutFamily::VariantOf(layout)), &least);
  return PipelineLowerBound(ComputeWorkOf(layout, pipeline, false), CommSecondsOf(WorkOf(least, pipeline, false)));
}

LayoutScore CostModel::PeakScore(double peak_bytes) const {
  LayoutScore score;
  score.peak_memory_gib = peak_bytes / kBytesPerGiB;
  score.fits = score.peak_memory_gib <= cluster_.gpu.hbm_gib;
  return score;
}

const char* Name(Objective objective) {
  return objective == Objective::kMemory ? "memory" : "throughput";
}

}  // namespace foldplan
