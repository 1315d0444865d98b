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
#include "costmodel/comm_plan.h"
#include "costmodel/compute_calibration.h"
#include "costmodel/compute_time.h"
#include "costmodel/flops.h"
#include "costmodel/routing.h"
#include "planner/group_placement.h"
#include "costmodel/schedule.h"
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

namespace {

// One thread's cache of type T for one cost model at a time: cleared
// (T::Clear) when the thread next serves another model, so that no model
// reads another's data.
template <class T>
T& ForModel(uint64_t model_id) {
  struct Slot {
    uint64_t model_id = 0;
    T cache;
  };
  thread_local Slot slot;
  if (slot.model_id != model_id) {
    slot.model_id = model_id;
    slot.cache.Clear();
  }
  return slot.cache;
}

// PlacementOf's: the placements of the search run in hand, the placements
// of group kinds under them (GroupPlacementCache: the same TP, EP, CP ...
// groups recur across pp, dp and orders), the current placement's
// collective timings, and under each kept placement parts of the plans
// made on it (CommPlanOf): their per-layer ops and their step ops.
struct PlacementCache {
  // Key: the fields PlaceGroups reads, the run's and the rest.
  struct RunKey {
    int world = -1, pp = 0, tp = 0, cp = 0;  // world -1: no run yet
    bool operator==(const RunKey&) const = default;
  };
  struct Key {
    int dp = 0, ep = 0, etp = 0;
    Placement placement = Placement::kLinear;
    std::string order;
  };
  static RunKey RunOf(const Layout& l) { return {l.world, l.pp, l.tp, l.cp}; }
  static bool Same(const Key& k, const Layout& l) {
    return k.dp == l.dp && k.ep == l.ep && k.etp == l.etp && k.placement == l.placement && k.order == l.order;
  }
  // A search walks its layouts in runs of one (world, pp, tp, cp)
  // (planner/enumerate.h RunsOf): each vpp and schedule in turn, over the
  // same dp, ep, etp and arrangements in the same order. The placements of
  // a run's fitting layouts for DeepSeek-V3 at 16,384 GPUs: up to 80 (the
  // default job), 369 (the widened one); 96 at 131,072. So the run's
  // placements are kept, up to kMaxKept (then dropped and kept afresh),
  // all dropped when the run changes; the one kept after the current is
  // looked at first.
  static constexpr size_t kMaxKept = 512;  // 2.5 kB each
  // Per-layer ops (BuildLayerCommOps) of one LayerCommKey on a kept
  // placement: `count` ops from `begin` in `ops`. The plans of the
  // layouts of a run placed alike that differ only in their pipeline share
  // them. Bounded: kMaxLayerOps ops in all (128 B each: 2 MiB) and
  // kMaxKeysPerPlacement keys per placement (found by a scan; the default
  // job plans 2 keys per placement, the widened one 8: its micro-batch
  // sizes and CP styles; with every recipe option a cap of 64 made the
  // search at 16,384 GPUs take ~6 % more CPU than without the sharing, 8
  // ~4 % less); past either, plans are built whole.
  static constexpr size_t kMaxLayerOps = 16384;
  static constexpr size_t kMaxKeysPerPlacement = 8;
  struct LayerOps {
    LayerCommKey key;
    size_t begin = 0, count = 0;
  };
  struct Kept {
    Key key;
    LayoutPlacement placed;
    bool ok = false;
    std::vector<LayerOps> layer_ops;
    // The step ops (AddStepCommOps) of the last pipeline planned on it
    // without FSDP, and its ranks: they read of the layout only tp, ep and
    // etp (the placement's) and of the pipeline its ranks, so the layouts
    // of a work item's micro-batch sizes, met in turn, share them.
    bool step_known = false;
    std::vector<PipelineRank> step_ranks;
    std::vector<CommOp> step_ops;
  };
  RunKey run;
  std::vector<Kept> kept;  // the first `used` are the run's; the rest keep their storage
  size_t used = 0;
  size_t current = 0;  // into kept, when used > 0: PlacementOf's last
  std::vector<CommOp> ops;
  GroupPlacementCache kinds;
  CollectiveTimeMemo timings;
  void DropRun() {
    used = 0;
    ops.clear();
  }
  void Clear() {
    kinds.Clear();
    timings.Clear();
    run = {};
    DropRun();
  }
  PlacementCache() {
    kept.reserve(kMaxKept);  // never moved: PlacementOf returns pointers into it
    Clear();
  }
};

// HostWorkOf per thread, by HostKey (what it reads of a layout: a search's
// layouts share few keys, since it holds the degrees only as whether they
// exceed 1). Bounded: cleared at kMaxEntries (about 400 B each).
class HostWorkMemo {
 public:
  const HostWork& Get(const Layout& l, const CostContext& ctx) {
    const HostKey key = HostKeyOf(l, *ctx.model);
    if (last_ && last_->first == key) return last_->second;
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      if (entries_.size() >= kMaxEntries) entries_.clear();
      it = entries_.emplace(key, HostWorkOf(key, ctx)).first;
    }
    last_ = &*it;
    return it->second;
  }
  void Clear() {
    entries_.clear();
    last_ = nullptr;
  }

 private:
  static constexpr size_t kMaxEntries = 4096;
  struct Hash {
    size_t operator()(const HostKey& k) const {
      const uint64_t flags = uint64_t(k.tp) | uint64_t(k.tp_cp) << 1 | uint64_t(k.ep) << 2 | uint64_t(k.ep_tp) << 3 |
                             uint64_t(k.etp) << 4 | uint64_t(k.ulysses) << 5 | uint64_t(k.a2a_overlap) << 6 |
                             uint64_t(k.tp_overlap) << 7 | uint64_t(k.recompute.full()) << 8 |
                             uint64_t(k.dispatcher) << 9 | uint64_t(k.precision) << 12 |
                             uint64_t(k.cuda_graphs.scope()) << 16 | uint64_t(k.cuda_graphs.modules()) << 18 |
                             uint64_t(k.recompute.modules()) << 24;
      return static_cast<size_t>(
          Mix64(flags ^ (uint64_t(uint32_t(k.local_experts)) << 32 | uint32_t(k.ring_steps))));
    }
  };
  std::unordered_map<HostKey, HostWork, Hash> entries_;
  const std::pair<const HostKey, HostWork>* last_ = nullptr;
};

}  // namespace

const HostWork& CostModel::HostOf(const Layout& layout, bool cached) const {
  if (cached) return ForModel<HostWorkMemo>(id_).Get(layout, ctx_);
  thread_local HostWork direct;
  direct = HostWorkOf(layout, ctx_);
  return direct;
}

// Group placement depends only on the degrees, order and placement, and is
// most of a layout's scoring time; each thread keeps the placements of
// the search run in hand (PlacementCache). The collective timings of the
// current placement go with it (CollectiveTimeMemo), and of the group
// kinds the next one places alike, stay.
const LayoutPlacement* CostModel::PlacementOf(const Layout& l, CollectiveTimeMemo** memo) const {
  PlacementCache& cache = ForModel<PlacementCache>(id_);
  *memo = &cache.timings;
  const PlacementCache::RunKey run = PlacementCache::RunOf(l);
  size_t found = cache.used;
  if (run == cache.run && cache.used > 0) {
    if (PlacementCache::Same(cache.kept[cache.current].key, l)) {
      const PlacementCache::Kept& k = cache.kept[cache.current];
      return k.ok ? &k.placed : nullptr;
    }
    const size_t after = cache.current + 1;
    if (after < cache.used && PlacementCache::Same(cache.kept[after].key, l)) found = after;
    for (size_t i = 0; i < cache.used && found == cache.used; ++i) {
      if (PlacementCache::Same(cache.kept[i].key, l)) found = i;
    }
  }
  const PlacementCache::Kept* before =
      cache.used > 0 && cache.kept[cache.current].ok ? &cache.kept[cache.current] : nullptr;
  if (found == cache.used) {
    if (!(run == cache.run) || cache.used == PlacementCache::kMaxKept) {
      // Slots are refilled from the first, the current's among them: the
      // timings forget every kind.
      cache.DropRun();
      cache.run = run;
      before = nullptr;
      found = 0;
    }
    if (found == cache.kept.size()) cache.kept.emplace_back();
    PlacementCache::Kept& k = cache.kept[found];
    k.key.dp = l.dp;
    k.key.ep = l.ep;
    k.key.etp = l.etp;
    k.key.placement = l.placement;
    k.key.order = l.order;
    k.layer_ops.clear();
    k.step_known = false;
    k.ok = PlaceGroups(l, topology_, &cache.kinds, &k.placed).ok();
    ++cache.used;
  }
  const PlacementCache::Kept& k = cache.kept[found];
  cache.timings.ChangePlacement(before ? &before->placed : nullptr, k.ok ? &k.placed : nullptr);
  cache.current = found;
  return k.ok ? &k.placed : nullptr;
}

void CostModel::CommPlanOf(const Layout& l, const LayoutPlacement& placement, const PipelineDescription& pipeline,
                           CollectiveTimeMemo* memo, std::vector<CommOp>* ops) const {
  PlacementCache& cache = ForModel<PlacementCache>(id_);
  PlacementCache::Kept* k = cache.used > 0 && &cache.kept[cache.current].placed == &placement
                                ? &cache.kept[cache.current]
                                : nullptr;
  if (!k) return BuildCommPlan(l, ctx_, placement, pipeline, memo, ops);
  const LayerCommKey key = LayerCommKeyOf(l);
  auto shared = std::find_if(k->layer_ops.begin(), k->layer_ops.end(),
                             [&](const PlacementCache::LayerOps& o) { return o.key == key; });
  if (shared != k->layer_ops.end()) {
    const auto first = cache.ops.begin() + static_cast<std::ptrdiff_t>(shared->begin);
    ops->assign(first, first + static_cast<std::ptrdiff_t>(shared->count));
  } else {
    BuildLayerCommOps(l, ctx_, placement, memo, ops);
    if (cache.ops.size() + ops->size() <= PlacementCache::kMaxLayerOps &&
        k->layer_ops.size() < PlacementCache::kMaxKeysPerPlacement) {
      k->layer_ops.push_back({key, cache.ops.size(), ops->size()});
      cache.ops.insert(cache.ops.end(), ops->begin(), ops->end());
    }
  }
  if (!l.fsdp) {
    if (k->step_known && k->step_ranks == pipeline.ranks) {
      ops->insert(ops->end(), k->step_ops.begin(), k->step_ops.end());
    } else {
      const size_t layer_ops = ops->size();
      AddStepCommOps(l, ctx_, placement, pipeline, memo, ops);
      k->step_ops.assign(ops->begin() + static_cast<std::ptrdiff_t>(layer_ops), ops->end());
      k->step_ranks = pipeline.ranks;
      k->step_known = true;
    }
  }
  AddRecomputeCalls(l.recompute, ops);
}

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
    build(ForModel<ComputeTimesCache>(id_).Get(layout, ctx_));
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

LayoutScore CostModel::Score(const Layout& layout, bool minimise_memory, double prune_above) const {
  return ScoreOf(layout, minimise_memory, true, prune_above);
}

LayoutScore CostModel::ScoreReference(const Layout& layout, bool minimise_memory) const {
  return ScoreOf(layout, minimise_memory, false, kNoPruning);
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

namespace {

// Memoises DescribePipeline for one model and its block weights. Key: what
// it reads of a layout: pp, vpp, the schedule it runs, its stage_layers and
// stage_mtp. Per thread; bounded: cleared at kMaxEntries (each a
// description of pp x vpp stages, a few KB at most).
class PipelineMemo {
 public:
  const PipelineDescription& Get(const Layout& l, const ModelSpec& model, const BlockWeights& weights) {
    const PipelineSchedule schedule = ScheduleOf(l);
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {  // newest first
      const Entry& e = *it;
      if (e.pp == l.pp && e.vpp == l.vpp && e.schedule == schedule && e.stage_layers == l.stage_layers &&
          e.stage_mtp == l.stage_mtp)
        return e.pipeline;
    }
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_.push_back({l.pp, l.vpp, schedule, l.stage_layers, l.stage_mtp, DescribePipeline(l, model, &weights)});
    return entries_.back().pipeline;
  }
  void Clear() { entries_.clear(); }

 private:
  static constexpr size_t kMaxEntries = 64;
  struct Entry {
    int pp, vpp;
    PipelineSchedule schedule;
    std::vector<int> stage_layers, stage_mtp;
    PipelineDescription pipeline;
  };
  std::vector<Entry> entries_;  // few distinct pipelines per search
};

}  // namespace

const PipelineDescription& CostModel::CachedPipeline(const Layout& layout) const {
  return ForModel<PipelineMemo>(id_).Get(layout, model_, weights_);
}

LayoutScore CostModel::PeakScore(double peak_bytes) const {
  LayoutScore score;
  score.peak_memory_gib = peak_bytes / kBytesPerGiB;
  score.fits = score.peak_memory_gib <= cluster_.gpu.hbm_gib;
  return score;
}

// Pruning (Score's header): the memory objective is the peak, exact here
// (the step time would only break ties among equal peaks); the step time
// is at least PipelineLowerBound of the compute alone (schedule.cc states
// the proof; the exposed data-parallel part and the optimizer step only
// add), so the placement and the communication plan are skipped when that
// already exceeds the bound.
LayoutScore CostModel::FinishScore(const Layout& layout, const PipelineDescription& pipeline, LayoutScore score,
                                   bool minimise_memory, bool cached, double prune_above,
                                   ComputedWork* computed, const std::vector<CommOp>* plan_without_recompute) const {
  if (!score.fits) return score;
  if (minimise_memory && score.peak_memory_gib > prune_above) {
    score.pruned = true;
    return score;
  }
  // The given work takes this layout's plan in place (AddCommOf replaces
  // its ops and reads nothing else of it) unless the plan without
  // recomputation is given (then its ops are not read); otherwise one per
  // thread, its storage kept from score to score.
  thread_local StepWork own;
  StepWork& work = computed ? computed->work : own;
  if (!computed) ComputeWorkOf(layout, pipeline, cached, &own);
  if (!minimise_memory && prune_above < kNoPruning &&
      (computed ? computed->bound_s : PipelineLowerBound(work)) > prune_above) {
    score.pruned = true;
    return score;
  }
  // The compute work holds no host (the bounds read none), and a family's
  // members share a compute key's work but not their host's (CUDA graphs,
  // overlaps): the member's own.
  work.host = HostOf(layout, cached);
  if (plan_without_recompute) {
    // The schedule reads the plan through its sums, which count the
    // layout's recompute calls in (SumPlan): no copy of the plan.
    thread_local PipelineTimes times;  // its storage kept from score to score
    SchedulePipeline(work, SumPlan(*plan_without_recompute, work.mtp_moe, layout.recompute), &times);
    score.step_time_s = StepAfter(layout, pipeline, work, times).step_time_s;
  } else {
    AddCommOf(layout, pipeline, cached, &work);
    score.step_time_s = StepOf(layout, pipeline, work, nullptr).step_time_s;
  }
  score.objective = minimise_memory ? score.peak_memory_gib : score.step_time_s;
  return score;
}

LayoutScore CostModel::ScoreOf(const Layout& layout, bool minimise_memory, bool cached, double prune_above) const {
  PipelineDescription uncached;
  if (!cached) uncached = DescribePipeline(layout, model_, &weights_);
  const PipelineDescription& pipeline = cached ? CachedPipeline(layout) : uncached;
  return FinishScore(layout, pipeline, PeakScore(memory_.PeakBytes(layout, pipeline)), minimise_memory, cached,
                     prune_above);
}

double CostModel::FamilyStepTimeLowerBound(const Layout& layout, uint32_t dispatchers, uint32_t precisions,
                                           bool cached) const {
  const PipelineDescription pipeline = DescribePipeline(layout, model_, &weights_);
  StepWork least;
  BuildLeastStepWork(layout, model_, cluster_.gpu, pipeline, LeastBlocksOf(layout, dispatchers, precisions, cached),
                     MicroBatchesPerStep(job_, layout), &least);
  return LeastPipelineLowerBound(least);
}

namespace {

// CostModel::LeastBlocksOf's memo, per thread and model. Key: what it
// reads of the layout (tp, cp, ep, etp, mbs, cp_style) and the two bit
// sets. A search meets each key for every (pp, vpp, schedule) of one (tp,
// cp), and for the layouts of every dp, so the memo is kept large: the
// widened search with every recipe option at 16,384 GPUs asks 274 k times
// and computes 63 k with 65,536 entries, 129 k with 16,384. Bounded:
// cleared at kMaxEntries (~150 B each, 10 MB).
struct LeastBlocksMemo {
  using Key = std::array<int32_t, 8>;
  struct KeyHash {
    size_t operator()(const Key& key) const {
      uint64_t h = 0x9e3779b97f4a7c15ull;
      for (int32_t v : key) h ^= static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      return static_cast<size_t>(h);
    }
  };
  static constexpr size_t kMaxEntries = 65536;
  std::unordered_map<Key, LeastBlocks, KeyHash> entries;
  void Clear() { entries.clear(); }
};

}  // namespace

LeastBlocks CostModel::LeastBlocksOf(const Layout& layout, uint32_t dispatchers, uint32_t precisions,
                                     bool cached) const {
  const auto compute = [&] {
    LeastBlocks least;
    Layout l = layout;
    l.recompute = Recompute::None();
    // dp 1: the most micro-batches per step, so the least share of the FP8
    // weight casts per micro-batch (1 / m, m = global batch / (dp mbs) at
    // least that of any dp); the rest of the compute reads no dp.
    l.dp = 1;
    for (int d = 0; d < kDispatcherCount; ++d) {
      if ((dispatchers >> d & 1u) == 0) continue;
      l.dispatcher = static_cast<Dispatcher>(d);
      for (int p = 0; p < kPrecisionCount; ++p) {
        if ((precisions >> p & 1u) == 0) continue;
        l.precision = static_cast<Precision>(p);
        if (cached) {
          least.Include(ForModel<ComputeTimesCache>(id_).Get(l, ctx_), model_.mtp_layer_is_moe());
        } else {
          least.Include(ComputeLayerTimes(l, ctx_), model_.mtp_layer_is_moe());
        }
      }
    }
    return least;
  };
  if (!cached) return compute();
  LeastBlocksMemo& memo = ForModel<LeastBlocksMemo>(id_);
  const LeastBlocksMemo::Key key = {layout.tp,
                                    layout.cp,
                                    layout.ep,
                                    layout.etp,
                                    layout.mbs,
                                    static_cast<int32_t>(layout.cp_style),
                                    static_cast<int32_t>(dispatchers),
                                    static_cast<int32_t>(precisions)};
  if (auto it = memo.entries.find(key); it != memo.entries.end()) return it->second;
  if (memo.entries.size() >= LeastBlocksMemo::kMaxEntries) memo.entries.clear();
  return memo.entries.emplace(key, compute()).first->second;
}

namespace {

// Whether two variants differ only where memory does not look (the TP
// overlap; a family's members share all memory reads but these fields).
bool SameMemory(const RecipeVariant& a, const RecipeVariant& b) {
  return a.recompute == b.recompute && a.dispatcher == b.dispatcher && a.a2a_overlap == b.a2a_overlap &&
         a.precision == b.precision && a.fsdp == b.fsdp;
}

}  // namespace

// A family's members share the pipeline, and the compute work of all but
// recompute, dispatcher and precision (ComputeWorkOf reads no arrangement,
// EP or TP overlap, or FSDP), and memory reads neither arrangement nor TP
// overlap. So, per variant: its peak once (for all its arrangements), and
// when it fits, the step-time bound once per compute key: the variant's
// members are then reported together when they do not fit or are pruned.
// The rest are scored member by member, arrangement-major (the placement
// and its collective timings computed once per arrangement), under the
// bound of the moment: a member is first held to its compute key's bound
// with the communication floor of its arrangement (StepTimeLowerBoundWithComm,
// one floor plan per CommFloorVariant and arrangement), and scored in full
// only when that does not prune it, its plan copied from its variant's
// without recomputation on the arrangement (one plan for all its recompute
// modes: AddRecomputeCalls). Under a schedule where the bound grows with the
// recomputation, a variant is pruned at once when the bound of its compute
// key without recomputation prunes. Every reported score is the member's
// Score bit for bit, or pruned under a bound the sink gave during the
// family (tests/costmodel_score_cache_test.cc).
void CostModel::ScoreFamily(const LayoutFamily& family, bool minimise_memory, ScoreSink& sink) const {
  const PipelineDescription& pipeline = CachedPipeline(family.base);
  thread_local FamilyPeakMemo peaks;
  peaks.Reset(memory_, family.base, pipeline);
  thread_local Layout l;  // assigned, so that its storage is kept from family to family
  l = family.base;
  struct Survivor {
    size_t variant;
    LayoutScore score;  // its peak, fitting
  };
  // The pipeline with one rank of each shape (what it holds): the bound
  // reads each rank's compute alone, in a max and a min over the ranks
  // (schedule.h), so a work of these ranks gives it bit for bit without
  // building every rank's.
  // Found once a bound is asked for (never while nothing can be pruned).
  thread_local PipelineDescription shapes;
  bool shaped = false;
  auto shapes_of_pipeline = [&]() -> const PipelineDescription& {
    if (!shaped) {
      shapes.schedule = pipeline.schedule;
      shapes.pp = pipeline.pp;
      shapes.vpp = pipeline.vpp;
      shapes.ranks.clear();
      for (const PipelineRank& r : pipeline.ranks) {
        if (std::find(shapes.ranks.begin(), shapes.ranks.end(), r) == shapes.ranks.end()) shapes.ranks.push_back(r);
      }
      shaped = true;
    }
    return shapes;
  };
  // One compute key's work on `shapes` and step-time bound, once a bound
  // is asked for (never while nothing can be pruned), and its work once a
  // member is scored in full.
  struct Compute {
    Recompute recompute;
    Dispatcher dispatcher;
    Precision precision;
    bool bounded = false;  // shape_work and computed.bound_s are the key's
    bool built = false;    // computed.work is the key's
    StepWork shape_work;   // on `shapes`: what the bounds read
    ComputedWork computed;
  };
  thread_local std::vector<Survivor> survivors;
  // The first `used` are this family's; the rest keep their works' storage.
  thread_local std::vector<Compute> computes;
  size_t used = 0;
  survivors.clear();
  // `l` set to the variant: its compute key's entry. The last one found
  // first: variants come in search order, the recompute mode outermost, so
  // neighbours share the key or the key found before.
  size_t last_key = 0;
  auto same_key = [](const Compute& c, const RecipeVariant& v) {
    return c.dispatcher == v.dispatcher && c.precision == v.precision && c.recompute == v.recompute;
  };
  auto compute_of = [&](const RecipeVariant& v) -> Compute& {
    if (last_key < used && same_key(computes[last_key], v)) return computes[last_key];
    for (size_t i = used; i-- > 0;) {
      if (same_key(computes[i], v)) return computes[last_key = i];
    }
    if (used == computes.size()) computes.emplace_back();
    last_key = used;
    Compute& c = computes[used++];
    c.recompute = v.recompute;
    c.dispatcher = v.dispatcher;
    c.precision = v.precision;
    c.bounded = false;
    c.built = false;
    return c;
  };
  // Variant i's compute key (by index into computes), found once per
  // family: a recipe family has hundreds of variants and dozens of keys.
  thread_local std::vector<int> key_of;
  key_of.assign(family.variants.size(), -1);
  auto compute_at = [&](size_t i) -> Compute& {
    if (key_of[i] < 0) key_of[i] = static_cast<int>(&compute_of(family.variants[i]) - computes.data());
    return computes[static_cast<size_t>(key_of[i])];
  };
  // `l` set to the key's variant: the entry with its bound.
  auto bounded = [&](Compute& c) -> Compute& {
    if (!c.bounded) {
      ComputeWorkOf(l, shapes_of_pipeline(), true, &c.shape_work);
      c.computed.bound_s = PipelineLowerBound(c.shape_work);
      c.bounded = true;
    }
    return c;
  };
  auto computed_of = [&](size_t i) -> ComputedWork& {
    Compute& c = compute_at(i);
    if (!c.built) {
      ComputeWorkOf(l, pipeline, true, &c.computed.work);
      c.built = true;
    }
    return c.computed;
  };
  // Where the bound grows with the recomputation (schedule.h), that of the
  // variant's compute key without recomputation is below each of its
  // recompute modes' bounds: when that prunes, their own are not needed.
  const bool floor_by_none = LowerBoundGrowsWithRecompute(pipeline.schedule);
  // The bound of the whole family's compute (FamilyStepTimeLowerBound over
  // its variants' dispatchers and precisions), once a bound is asked for:
  // no variant's own bound is lower, so when it prunes, theirs are not
  // needed. Over one dispatcher and precision it would add nothing the
  // variants' shared compute keys do not already give (they share the
  // key without recomputation, floor_of), so it is left at 0 there.
  double family_bound_s = std::numeric_limits<double>::quiet_NaN();
  auto family_bound = [&] {
    if (std::isnan(family_bound_s)) {
      uint32_t dispatchers = 0, precisions = 0;
      for (const RecipeVariant& v : family.variants) {
        dispatchers |= 1u << static_cast<unsigned>(v.dispatcher);
        precisions |= 1u << static_cast<unsigned>(v.precision);
      }
      if (std::has_single_bit(dispatchers) && std::has_single_bit(precisions)) return family_bound_s = 0.0;
      thread_local StepWork least;
      BuildLeastStepWork(l, model_, cluster_.gpu, shapes_of_pipeline(), LeastBlocksOf(l, dispatchers, precisions, true),
                         MicroBatchesPerStep(job_, l), &least);
      family_bound_s = LeastPipelineLowerBound(least);
    }
    return family_bound_s;
  };
  auto floor_of = [&](const RecipeVariant& v) {
    RecipeVariant none = v;
    none.recompute = Recompute::None();
    l.recompute = none.recompute;
    const double bound_s = bounded(compute_of(none)).computed.bound_s;
    l.recompute = v.recompute;
    return bound_s;
  };
  LayoutScore peak;
  const RecipeVariant* peak_of = nullptr;
  for (size_t v = 0; v < family.variants.size(); ++v) {
    const uint64_t members = family.MembersOf(v);
    if (members == 0) continue;
    const RecipeVariant& variant = family.variants[v];
    LayoutFamily::SetVariant(variant, &l);
    if (!peak_of || !SameMemory(*peak_of, variant)) {
      peak = PeakScore(peaks.PeakBytes(l));
      peak_of = &variant;
    }
    LayoutScore score = peak;
    if (!score.fits) {
      sink.ScoredAlike(score, members);
      continue;
    }
    const double prune_above = sink.PruneAbove();
    bool pruned = false;
    if (minimise_memory) {
      pruned = score.peak_memory_gib > prune_above;
    } else if (prune_above < kNoPruning) {
      pruned = family_bound() > prune_above ||
               (floor_by_none && !variant.recompute.none() && floor_of(variant) > prune_above) ||
               bounded(compute_at(v)).computed.bound_s > prune_above;
    }
    if (pruned) {
      score.pruned = true;
      sink.ScoredAlike(score, members);
      continue;
    }
    survivors.push_back({v, score});
  }
  if (survivors.empty()) return;
  // The score reads an arrangement only through its group placement
  // (AddCommOf; memory and compute read neither order nor placement), so
  // the members of an arrangement placed as an earlier one take that one's
  // scores: each is its Score, or pruned (its bound above one at least the
  // current bound); pruning is never required (planner/scoring.h).
  // The plans of the arrangement in hand without recomputation, one per
  // recipe variant without it that is asked for, built when first asked: a
  // member's own (AddRecomputeCalls makes it the member's plan, so the
  // recompute modes of one variant share it), and a member's communication
  // floor, the plan of its CommFloorVariant (no recomputation, no EP or TP
  // overlap; a member without overlaps shares its own). A member's own ops
  // take at least as long as its floor's per block and per crossing
  // (comm_plan.h says why), so PipelineLowerBound(its compute key's shape
  // work, the floor's CommSeconds) bounds its step time, communication
  // included: one value per (floor, compute key), which the members
  // differing in overlaps share.
  struct Plan {
    RecipeVariant variant;  // without recomputation
    std::vector<CommOp> ops;
    bool floors = false;         // seconds is its CommSeconds
    CommSeconds seconds;
    std::vector<double> bounds;  // the bound on each compute key's shape work (by index), NaN until asked
  };
  thread_local std::vector<Plan> plans;  // the first `plans_used` are the arrangement's
  size_t plans_used = 0;
  thread_local std::vector<int> floor_at;  // variant i's floor plan under the arrangement in hand, once found
  thread_local std::vector<int> own_at;    // and its own plan without recomputation
  // The plan of `none` (a variant without recomputation) on the arrangement
  // in hand (`l` set to it), placed as `placement`: its index in `plans`.
  auto plan_of = [&](const RecipeVariant& none, const LayoutPlacement& placement, CollectiveTimeMemo* memo) {
    size_t f = 0;
    while (f < plans_used && !(plans[f].variant == none)) ++f;
    if (f == plans_used) {
      if (plans_used == plans.size()) plans.emplace_back();
      Plan& added = plans[plans_used++];
      const RecipeVariant member = LayoutFamily::VariantOf(l);
      LayoutFamily::SetVariant(none, &l);
      CommPlanOf(l, placement, pipeline, memo, &added.ops);
      LayoutFamily::SetVariant(member, &l);
      added.variant = none;
      added.floors = false;
      added.bounds.clear();
    }
    return static_cast<int>(f);
  };
  // The bound with communication of a member of variant `i` under the
  // arrangement in hand (`l` set to it): its compute key's shape work with
  // its floor.
  auto comm_bound_of = [&](size_t i, const LayoutPlacement& placement, CollectiveTimeMemo* memo) -> double {
    const Compute& c = bounded(compute_at(i));
    const size_t key = static_cast<size_t>(&c - computes.data());
    if (floor_at[i] < 0) floor_at[i] = plan_of(CommFloorVariant(family.variants[i]), placement, memo);
    Plan& floor = plans[static_cast<size_t>(floor_at[i])];
    if (!floor.floors) {
      floor.seconds = CommSecondsOf(floor.ops, c.shape_work.mtp_moe);
      floor.floors = true;
    }
    if (floor.bounds.size() <= key) floor.bounds.resize(key + 1, std::numeric_limits<double>::quiet_NaN());
    if (std::isnan(floor.bounds[key])) floor.bounds[key] = PipelineLowerBound(c.shape_work, floor.seconds);
    return floor.bounds[key];
  };
  // Variant i's own plan without recomputation under the arrangement in hand.
  auto own_plan_of = [&](size_t i, const LayoutPlacement& placement, CollectiveTimeMemo* memo) {
    if (own_at[i] < 0) {
      RecipeVariant none = family.variants[i];
      none.recompute = Recompute::None();
      own_at[i] = plan_of(none, placement, memo);
    }
    return &plans[static_cast<size_t>(own_at[i])].ops;
  };
  thread_local std::vector<LayoutPlacement> placed;  // per arrangement scored, when placed
  thread_local std::vector<size_t> scored_at;        // their indices
  thread_local std::vector<LayoutScore> scores;      // [scored arrangement][survivor]
  placed.clear();
  scored_at.clear();
  scores.clear();
  for (size_t a = 0; a < family.arrangements.size(); ++a) {
    LayoutFamily::SetArrangement(family.arrangements[a], &l);
    CollectiveTimeMemo* memo = nullptr;
    const LayoutPlacement* placement = PlacementOf(l, &memo);
    size_t same = scored_at.size();  // an earlier arrangement placed alike, if any
    for (size_t i = 0; placement && i < scored_at.size() && same == scored_at.size(); ++i) {
      if (placed[i] == *placement) same = i;
    }
    const bool reuse = same < scored_at.size();
    // Its scores kept for a later arrangement placed alike, if any.
    const bool record = !reuse && placement && a + 1 < family.arrangements.size();
    if (record) {
      placed.push_back(*placement);
      scored_at.push_back(a);
      scores.resize(scores.size() + survivors.size());
    }
    plans_used = 0;
    floor_at.assign(family.variants.size(), -1);
    own_at.assign(family.variants.size(), -1);
    for (size_t k = 0; k < survivors.size(); ++k) {
      const Survivor& s = survivors[k];
      if (!family.Legal(a, s.variant)) continue;
      const RecipeVariant& variant = family.variants[s.variant];
      LayoutFamily::SetVariant(variant, &l);
      if (reuse && family.Legal(scored_at[same], s.variant)) {
        sink.Scored(l, scores[same * survivors.size() + k]);
        continue;
      }
      const double prune_above = sink.PruneAbove();
      LayoutScore score = s.score;
      if (!minimise_memory && prune_above < kNoPruning) {
        // The compute-only bound first: it may prune without a floor plan
        // (and FinishScore reads it).
        score.pruned = bounded(compute_at(s.variant)).computed.bound_s > prune_above ||
                       (placement && comm_bound_of(s.variant, *placement, memo) > prune_above);
      }
      if (!score.pruned) {
        ComputedWork* computed = minimise_memory ? nullptr : &computed_of(s.variant);
        // Its plan from its variant's without recomputation, unless memory
        // prunes it first (FinishScore) or it cannot be placed (no plan).
        const bool planned = placement && !(minimise_memory && s.score.peak_memory_gib > prune_above);
        score = FinishScore(l, pipeline, s.score, minimise_memory, true, prune_above, computed,
                            planned ? own_plan_of(s.variant, *placement, memo) : nullptr);
      }
      if (record) scores[(scored_at.size() - 1) * survivors.size() + k] = score;
      sink.Scored(l, score);
    }
  }
}

const char* Name(Objective objective) {
  return objective == Objective::kMemory ? "memory" : "throughput";
}

}  // namespace foldplan
