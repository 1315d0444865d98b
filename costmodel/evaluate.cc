#include "costmodel/evaluate.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "costmodel/comm_plan.h"
#include "costmodel/compute_time.h"
#include "costmodel/flops.h"
#include "planner/group_placement.h"
#include "planner/pipeline_split.h"

namespace foldplan {
namespace {

// Layers held by each pipeline rank: total and MoE (virtual stage c = v*pp + p
// holds the c-th contiguous chunk of layers).
struct StageLayers {
  int layers = 0;
  int moe = 0;
};

std::vector<StageLayers> LayersPerStage(const Layout& l, const ModelSpec& model) {
  std::vector<StageLayers> out(static_cast<size_t>(l.pp));
  int layer = 0;
  for (size_t c = 0; c < l.stage_layers.size(); ++c) {
    StageLayers& s = out[c % static_cast<size_t>(l.pp)];
    for (int i = 0; i < l.stage_layers[c]; ++i, ++layer) {
      ++s.layers;
      if (model.layer_is_moe(layer)) ++s.moe;
    }
  }
  return out;
}

// Seconds of one call set of an op per micro-batch (forward and backward).
double PerMicrobatch(const CommOp& op) { return (op.calls_fwd + op.calls_bwd) * op.seconds_per_call; }

struct StageCost {
  double compute_s = 0;
  double fwd_s = 0;  // compute only, for the data-parallel overlap windows
  double bwd_s = 0;
  double exposed_comm_s = 0;
};

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

}  // namespace

Result<std::unique_ptr<CostModel>> CostModel::Create(const ClusterSpec& cluster, const ModelSpec& model,
                                                     const JobSpec& job) {
  auto topology = Topology::Build(cluster);
  if (!topology.ok()) return topology.status();
  auto profile = ComputeProfile::Load(ComputeProfile::DefaultPath());
  if (!profile.ok()) return profile.status();
  auto comm = CommParamsFor(cluster);
  if (!comm.ok()) return comm.status();
  return std::unique_ptr<CostModel>(new CostModel(cluster, model, job, std::move(topology).value(),
                                                  profile.value().ScaledTo(cluster.gpu), comm.value()));
}

CostModel::CostModel(const ClusterSpec& cluster, const ModelSpec& model, const JobSpec& job,
                     Topology topology, ComputeProfile profile, CommParams comm)
    : cluster_(cluster),
      model_(model),
      job_(job),
      topology_(std::move(topology)),
      profile_(std::move(profile)),
      comm_(std::move(comm)),
      ctx_{&cluster_, &model_, &job_, &topology_, &profile_, &comm_},
      memory_(ctx_),
      id_(next_id_.fetch_add(1) + 1) {}

std::atomic<uint64_t> CostModel::next_id_{0};

// Group placement depends only on the degrees, order and placement, and is
// most of a layout's scoring time; the search scores layouts sharing them
// one after another (planner/search.cc), so each thread keeps the last one.
const LayoutPlacement* CostModel::PlacementOf(const Layout& l) const {
  struct Cache {
    uint64_t model_id = 0;
    std::tuple<int, int, int, int, int, int, int, std::string, Placement> key;
    Result<LayoutPlacement> placement = Status::Error("empty");
  };
  thread_local Cache cache;
  auto key = std::make_tuple(l.world, l.pp, l.tp, l.cp, l.dp, l.ep, l.etp, l.order, l.placement);
  if (cache.model_id != id_ || cache.key != key) {
    cache.model_id = id_;
    cache.key = std::move(key);
    cache.placement = PlaceGroups(l, topology_);
  }
  return cache.placement.ok() ? &cache.placement.value() : nullptr;
}

StepBreakdown CostModel::Step(const Layout& layout, std::vector<CommKindCost>* comm_out) const {
  StepBreakdown s;
  const ComputeTimes compute = ComputeLayerTimes(layout, ctx_);
  std::vector<CommOp> ops;
  if (const LayoutPlacement* placement = PlacementOf(layout)) {
    ops = BuildCommPlan(layout, ctx_, *placement);
  }
  const std::vector<StageLayers> stages = LayersPerStage(layout, model_);
  s.microbatches = job_.global_batch / (static_cast<long long>(layout.dp) * layout.mbs);
  const double m = static_cast<double>(std::max<long long>(s.microbatches, 1));

  // Per micro-batch cost of each pipeline rank.
  auto layer_compute = [](const LayerTimes& t) { return t.fwd_s() + t.bwd_s() + t.recompute_s; };
  std::vector<StageCost> cost(stages.size());
  for (size_t p = 0; p < stages.size(); ++p) {
    const int dense = stages[p].layers - stages[p].moe, moe = stages[p].moe;
    StageCost& c = cost[p];
    c.fwd_s = dense * compute.dense_layer.fwd_s() + moe * compute.moe_layer.fwd_s();
    c.bwd_s = dense * (compute.dense_layer.bwd_s() + compute.dense_layer.recompute_s) +
              moe * (compute.moe_layer.bwd_s() + compute.moe_layer.recompute_s);
    if (p == 0) c.fwd_s += compute.embedding.fwd_s, c.bwd_s += compute.embedding.bwd_s;
    if (p + 1 == stages.size()) c.fwd_s += compute.output_layer.fwd_s, c.bwd_s += compute.output_layer.bwd_s;
    c.compute_s = c.fwd_s + c.bwd_s;
    // Per-layer communication: exposed unless overlappable, and then only
    // beyond the compute of the layer it overlaps.
    for (bool moe_kind : {false, true}) {
      const int count = moe_kind ? moe : dense;
      if (count == 0) continue;
      double exposed = 0, hidden = 0;
      for (const CommOp& op : ops) {
        const bool applies = op.scope == CommOp::kPerLayer ||
                             (op.scope == CommOp::kPerMoeLayer && moe_kind) ||
                             (op.scope == CommOp::kPerDenseLayer && !moe_kind);
        if (!applies) continue;
        (op.overlappable ? hidden : exposed) += PerMicrobatch(op);
      }
      const double layer_s = layer_compute(moe_kind ? compute.moe_layer : compute.dense_layer);
      c.exposed_comm_s += count * (exposed + std::max(0.0, hidden - layer_s));
    }
    if (layout.pp > 1) {
      for (const CommOp& op : ops) {
        if (op.scope == CommOp::kPerStageBoundary) c.exposed_comm_s += PerMicrobatch(op);
      }
    }
  }
  size_t slowest = 0;
  for (size_t p = 1; p < cost.size(); ++p) {
    if (cost[p].compute_s + cost[p].exposed_comm_s > cost[slowest].compute_s + cost[slowest].exposed_comm_s) {
      slowest = p;
    }
  }
  const StageCost& worst = cost[slowest];
  s.slowest_stage = static_cast<int>(slowest);
  s.stage_compute_s = worst.compute_s;
  s.stage_exposed_comm_s = worst.exposed_comm_s;
  s.stage_time_s = worst.compute_s + worst.exposed_comm_s;
  s.bubble_s = double(layout.pp - 1) / layout.vpp * s.stage_time_s;
  s.pipeline_s = m * s.stage_time_s + s.bubble_s;

  // Data-parallel traffic once per step, hidden behind one micro-batch's
  // backward (reductions) or forward (parameter gathers).
  double reduce_s = 0, gather_s = 0;
  for (const CommOp& op : ops) {
    if (op.scope != CommOp::kPerStep) continue;
    (op.collective == Collective::kAllGather ? gather_s : reduce_s) += PerMicrobatch(op);
  }
  s.dp_exposed_s = std::max(0.0, reduce_s - worst.bwd_s) + std::max(0.0, gather_s - worst.fwd_s);

  const StageParams params = memory_.ParamsOnStage(layout, s.slowest_stage);
  const double dense_shard = job_.distributed_optimizer ? double(layout.dp) * layout.cp : 1.0;
  const double expert_shard = job_.distributed_optimizer ? double(layout.edp) : 1.0;
  s.optimizer_s = OptimizerStepSeconds(params.dense / dense_shard + params.expert / expert_shard, profile_);

  s.step_time_s = s.pipeline_s + s.dp_exposed_s + s.optimizer_s;
  s.tokens_per_s = double(job_.global_batch) * job_.seq_len / s.step_time_s;
  s.model_flops_per_token = ModelFlopsPerToken(model_, job_.seq_len);
  s.mfu = s.model_flops_per_token * s.tokens_per_s / (double(layout.world) * cluster_.gpu.peak_bf16_flops);

  if (comm_out) {
    // Per-kind totals on the slowest stage over the whole step.
    CommTally tally(comm_out);
    const StageLayers& st = stages[slowest];
    for (const CommOp& op : ops) {
      double per_step = 0;
      switch (op.scope) {
        case CommOp::kPerLayer: per_step = PerMicrobatch(op) * st.layers * m; break;
        case CommOp::kPerDenseLayer: per_step = PerMicrobatch(op) * (st.layers - st.moe) * m; break;
        case CommOp::kPerMoeLayer: per_step = PerMicrobatch(op) * st.moe * m; break;
        case CommOp::kPerStageBoundary: per_step = layout.pp > 1 ? PerMicrobatch(op) * m : 0; break;
        case CommOp::kPerStep: per_step = PerMicrobatch(op); break;
      }
      if (per_step <= 0) continue;
      // Exposure is attributed to non-overlappable ops; overlappable ones are
      // reported as hidden (their excess, if any, is in the stage total).
      const bool exposed = !op.overlappable && op.scope != CommOp::kPerStep;
      tally.Add(op.name, per_step, exposed ? per_step : 0);
    }
    if (s.dp_exposed_s > 0) tally.Add("data-parallel (exposed part)", 0, s.dp_exposed_s);
  }
  return s;
}

Evaluation CostModel::Evaluate(const Layout& input) const {
  Evaluation e;
  e.layout = input;
  e.violations = CheckLayout(input, {&cluster_, &model_, &job_});
  if (!e.layout.explicit_stages) {
    auto split = SplitLayers(model_.layers, e.layout.pp, e.layout.vpp);
    // No Megatron split: spread the layers as evenly as possible so the
    // costs still mean something next to the reported violation.
    if (split.ok()) e.layout.stage_layers = split.value();
    else {
      const int stages = e.layout.pp * e.layout.vpp;
      e.layout.stage_layers.assign(static_cast<size_t>(stages), model_.layers / stages);
      for (int i = 0; i < model_.layers % stages; ++i) ++e.layout.stage_layers[static_cast<size_t>(i)];
    }
  }
  e.step = Step(e.layout, &e.comm);
  e.memory = memory_.Estimate(e.layout);
  return e;
}

LayoutScore CostModel::Score(const Layout& layout, bool minimise_memory) const {
  LayoutScore score;
  int worst_stage = 0;
  const double peak_bytes = memory_.PeakBytes(layout, &worst_stage);
  score.peak_memory_gib = peak_bytes / kBytesPerGiB;
  score.fits = score.peak_memory_gib <= cluster_.gpu.hbm_gib;
  if (!score.fits) return score;
  score.step_time_s = Step(layout, nullptr).step_time_s;
  score.objective = minimise_memory ? score.peak_memory_gib : score.step_time_s;
  return score;
}

const char* Name(Objective objective) {
  return objective == Objective::kMemory ? "memory" : "throughput";
}

}  // namespace foldplan
