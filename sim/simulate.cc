#include "sim/simulate.h"

#include <algorithm>
#include <functional>
#include <map>

#include "costmodel/compute_time.h"
#include "sim/pipeline_order.h"

namespace foldplan {
namespace {

constexpr uint32_t kNone = UINT32_MAX;
// SweepRank's slot for the host stream's launches, after the kinds.
constexpr int kLaunching = kSimKindCount;

// Per rank: time with compute running, busy, and communication (or a host
// sync) while no compute runs, by kind (a stretch two kinds share split
// between them). The host stream's tasks are counted apart (comm_s[host]).
void SweepRank(const TaskGraph& g, const EngineRun& run, const std::vector<uint32_t>& tasks, SimNs pipeline_start,
               SimNs pipeline_end, SimRankStats& st) {
  struct Edge {
    SimNs t;
    int kind;
    int delta;
  };
  std::vector<Edge> edges;
  edges.reserve(tasks.size() * 2);
  for (uint32_t id : tasks) {
    const SimNs s = run.start_ns[id], e = run.end_ns[id];
    if (e <= s) continue;
    int k = static_cast<int>(g.task(id).kind);
    // The host stream's launches run on the CPU: their time is the host's
    // issuing (comm_s[host]); a GPU with nothing else to run meanwhile
    // waits for them (exposed host), as it does through a sync.
    if (g.task(id).stream == SimStream::kHost) {
      st.comm_s[static_cast<size_t>(k)] += ToSeconds(e - s);
      k = kLaunching;
    } else if (k != 0) {
      st.comm_s[static_cast<size_t>(k)] += ToSeconds(e - s);
    }
    edges.push_back({s, k, +1});
    edges.push_back({e, k, -1});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.t < b.t; });
  std::array<int, kSimKindCount + 1> active{};
  SimNs busy = 0, compute = 0, busy_in_pipeline = 0;
  std::array<double, kSimKindCount> exposed{};
  const auto host = static_cast<size_t>(SimKind::kHost);
  for (size_t i = 0; i < edges.size();) {
    const SimNs t = edges[i].t;
    while (i < edges.size() && edges[i].t == t) {
      active[static_cast<size_t>(edges[i].kind)] += edges[i].delta;
      ++i;
    }
    if (i == edges.size()) break;
    const SimNs len = edges[i].t - t;
    int comm_kinds = 0;
    for (int k = 1; k < kSimKindCount; ++k) comm_kinds += active[static_cast<size_t>(k)] > 0;
    // Nothing on the GPU but the host launching: the GPU waits for its host.
    const bool waits_for_host = active[0] == 0 && comm_kinds == 0 && active[kLaunching] > 0;
    if (active[0] > 0 || comm_kinds > 0 || waits_for_host) {
      busy += len;
      busy_in_pipeline += std::max<SimNs>(0, std::min(edges[i].t, pipeline_end) - std::max(t, pipeline_start));
    }
    if (active[0] > 0) {
      compute += len;
    } else if (comm_kinds > 0) {
      for (int k = 1; k < kSimKindCount; ++k) {
        if (active[static_cast<size_t>(k)] > 0) exposed[static_cast<size_t>(k)] += double(len) / comm_kinds;
      }
    } else if (waits_for_host) {
      exposed[host] += double(len);
    }
  }
  st.busy_s = ToSeconds(busy);
  st.compute_s = ToSeconds(compute);
  for (int k = 1; k < kSimKindCount; ++k) st.exposed_s[static_cast<size_t>(k)] = exposed[static_cast<size_t>(k)] * 1e-9;
  st.pipeline_idle_s = ToSeconds(pipeline_end - pipeline_start - busy_in_pipeline);
}

// Memory over time on each rank: the memory model's terms for the rank,
// its activations replaced by those of the chunks in flight (a chunk's
// activations are alive from the end of its forward to the end of its
// backward, or of its weight-gradient pass when the schedule splits it).
// Under imbalance (`loads`, on the whole path's `rank_map`), a rank's
// expert rows differ from the costed ones layer by layer: a chunk's
// activations in flight for micro-batch m hold, beyond its balanced share,
// sum over its MoE layers l of (x(l, m) - 1) x the layer's expert-row bytes
// (MemoryModel::BytesOfReceivedRows), x(l, m) the rank's drawn load over
// the costed one; its dispatch buffers, sized for the busiest layer it
// receives, (max x - 1) x their received part more. Both are short-lived,
// charged fragmentation like the activations.
struct RankLoads {
  const RankMap* map = nullptr;
  const ExpertLoadDraw* draw = nullptr;
  double costed = 1;  // StepWork::load_factor
};

void MemoryTimelines(const CostModel& model, const Layout& layout, const PipelineDescription& pipe,
                     const PipelineOrder& order, const StepGraph& sg, const EngineRun& run, const RankLoads& loads,
                     std::vector<SimRankStats>& ranks) {
  const MemoryModel& mem = model.memory();
  const ModelSpec& spec = *model.context().model;
  const double frag = 1 + mem.assumptions().fragmentation;
  const double dense_layer = mem.LayerActivationBytes(layout, false, layout.recompute);
  const double moe_layer = mem.LayerActivationBytes(layout, true, layout.recompute);
  const MemoryModel::ReceivedRowBytes received =
      loads.draw ? mem.BytesOfReceivedRows(layout) : MemoryModel::ReceivedRowBytes{};
  // Each rank's EP group and place in it (the draws' key).
  std::vector<std::pair<int, int>> ep_place;
  if (loads.draw && loads.map) {
    ep_place.assign(size_t(loads.map->world()), {0, 0});
    const Groups& ep = loads.map->groups(GroupKind::kEp);
    for (size_t g = 0; g < ep.size(); ++g) {
      for (size_t i = 0; i < ep[g].size(); ++i) ep_place[size_t(ep[g][i])] = {int(g), int(i)};
    }
  }
  std::vector<double> factors;
  std::map<int, MemoryBreakdown> by_stage;
  std::vector<std::vector<uint32_t>> by_rank(static_cast<size_t>(sg.graph.ranks()));  // each rank's passes
  for (uint32_t i = 0; i < sg.passes.size(); ++i) by_rank[static_cast<size_t>(sg.passes[i].rank)].push_back(i);
  for (SimRankStats& st : ranks) {
    const int p = st.pipeline_rank;
    auto at = by_stage.find(p);
    if (at == by_stage.end()) at = by_stage.emplace(p, mem.EstimateStage(layout, p)).first;
    const MemoryBreakdown& b = at->second;
    st.model_peak_memory_bytes = b.peak_bytes;
    st.model_inflight_microbatches = b.inflight_microbatches;
    const double activations = b.bytes_of(memory_term::kActivations);
    const double base = b.peak_bytes - frag * activations;
    // A chunk's share of the rank's per-micro-batch activations, by its layers.
    std::vector<double> share(static_cast<size_t>(order.vpp), 0.0);
    double total = 0;
    for (int c = 0; c < order.vpp; ++c) {
      const VirtualStage& vs = pipe.stages[static_cast<size_t>(order.VirtualStage(p, c))];
      share[static_cast<size_t>(c)] = vs.moe_layers * moe_layer + vs.dense_layers() * dense_layer;
      total += share[static_cast<size_t>(c)];
    }
    const double per_microbatch = b.inflight_microbatches > 0 ? activations / b.inflight_microbatches : 0;
    // The rank's expert rows over the costed ones in micro-batch `mb`'s
    // MoE layers of `chunk`: their bytes beyond the balanced share.
    const bool drawn = !ep_place.empty() && size_t(st.rank) < ep_place.size();
    double factor_sum = 0, factor_count = 0, factor_max = 1;
    auto excess = [&](int chunk, int mb) {
      if (!drawn) return 0.0;
      const VirtualStage& vs = pipe.stages[static_cast<size_t>(order.VirtualStage(p, chunk))];
      double bytes = 0;
      for (int l = vs.first_layer; l < vs.first_layer + vs.layers; ++l) {
        if (!spec.layer_is_moe(l)) continue;
        loads.draw->Draw(uint64_t(ep_place[size_t(st.rank)].first), l, mb, factors);
        const size_t i = size_t(ep_place[size_t(st.rank)].second);
        const double x = (i < factors.size() ? factors[i] : 1.0) / std::max(1e-9, loads.costed);
        factor_sum += x;
        factor_count += 1;
        factor_max = std::max(factor_max, x);
        bytes += (x - 1) * received.activations_per_moe_layer;
      }
      return bytes;
    };
    std::vector<std::pair<SimNs, double>> changes;  // (time, stage-equivalents)
    std::vector<double> bytes_of;                    // per change: its bytes beyond the balanced share
    std::map<std::pair<int, int>, double> alive;     // (chunk, micro-batch) -> its excess while in flight
    for (uint32_t pi : by_rank[static_cast<size_t>(st.rank)]) {
      const PassRecord& r = sg.passes[pi];
      const double w = total > 0 ? share[static_cast<size_t>(r.chunk)] / total : 1.0 / order.vpp;
      const bool frees = order.split_backward ? r.kind == PassKind::kWeightGrad : r.kind == PassKind::kBackward;
      if (r.kind == PassKind::kForward) {
        const double x = excess(r.chunk, r.microbatch);
        alive[{r.chunk, r.microbatch}] = x;
        changes.push_back({run.end_ns[r.last_task], w});
        bytes_of.push_back(x);
      } else if (frees) {
        const auto it = alive.find({r.chunk, r.microbatch});
        changes.push_back({run.end_ns[r.last_task], -w});
        bytes_of.push_back(it == alive.end() ? 0.0 : -it->second);
      }
    }
    // Frees before allocations at the same instant.
    std::vector<size_t> in_time(changes.size());
    for (size_t i = 0; i < in_time.size(); ++i) in_time[i] = i;
    std::stable_sort(in_time.begin(), in_time.end(), [&](size_t x, size_t y) {
      return changes[x].first != changes[y].first ? changes[x].first < changes[y].first
                                                  : changes[x].second < changes[y].second;
    });
    // The dispatch buffers of the busiest layer received, for the step.
    const double rank_base = base + (drawn ? frag * (factor_max - 1) * received.dispatch : 0);
    double inflight = 0, extra = 0, peak = 0, peak_bytes = rank_base;
    SimNs peak_at = 0;
    st.memory_timeline.push_back({0.0, rank_base});
    for (size_t i : in_time) {
      const auto& [t, d] = changes[i];
      inflight += d;
      extra += bytes_of[i];
      const double bytes = rank_base + frag * per_microbatch * inflight + (drawn ? frag * extra : 0);
      st.memory_timeline.push_back({ToSeconds(t), bytes});
      if (drawn ? bytes > peak_bytes + 1e-3 : inflight > peak + 1e-9) {
        peak = inflight;
        peak_bytes = bytes;
        peak_at = t;
      }
    }
    st.peak_inflight_microbatches = peak;
    st.peak_memory_bytes = drawn ? peak_bytes : base + frag * per_microbatch * peak;
    st.peak_memory_at_s = ToSeconds(peak_at);
    st.received_over_costed = factor_count > 0 ? factor_sum / factor_count : 1;
  }
}

std::vector<CriticalSegment> CriticalPath(const StepGraph& sg, const EngineRun& run,
                                          std::array<double, kSimKindCount>& by_kind) {
  const TaskGraph& g = sg.graph;
  uint32_t at = kNone;
  for (uint32_t id : sg.optimizer) {
    if (at == kNone || run.end_ns[id] > run.end_ns[at]) at = id;
  }
  std::vector<uint32_t> chain;
  while (at != kNone) {
    chain.push_back(at);
    at = run.critical_pred[at];
  }
  std::reverse(chain.begin(), chain.end());
  std::vector<CriticalSegment> out;
  for (uint32_t id : chain) {
    const SimTask& t = g.task(id);
    const int rank = g.members(id)[0];  // a collective: its first member
    const double d = ToSeconds(run.end_ns[id] - run.start_ns[id]);
    by_kind[static_cast<size_t>(t.kind)] += d;
    if (out.empty() || out.back().rank != rank || out.back().pass != t.pass ||
        out.back().microbatch != t.microbatch || out.back().chunk != t.chunk) {
      CriticalSegment& s = out.emplace_back();
      s.rank = rank;
      s.pass = t.pass;
      s.microbatch = t.microbatch;
      s.chunk = t.chunk;
      s.start_s = ToSeconds(run.start_ns[id]);
    }
    CriticalSegment& s = out.back();
    s.duration_s = ToSeconds(run.end_ns[id]) - s.start_s;
    s.by_kind_s[static_cast<size_t>(t.kind)] += d;
    ++s.tasks;
  }
  return out;
}

}  // namespace

OverlapSet ResolveOverlap(const OverlapOptions& options, PipelineSchedule schedule) {
  OverlapSet o;
  o.tp = options.tp;
  o.cp = options.cp;
  o.dp = options.dp;
  o.ep = options.ep;
  // DualPipeV overlaps its pairs' all-to-alls by design.
  if (!o.ep && schedule == PipelineSchedule::kDualPipeV) o.ep = true;
  o.pp = options.pp.value_or(schedule == PipelineSchedule::kInterleaved1F1B ||
                             schedule == PipelineSchedule::kDualPipeV);
  o.shared = options.shared.value_or(false);
  o.host = options.host.value_or(true);
  return o;
}

Result<SimResult> SimulateWork(const StepWork& work, const ModelSpec& model, const PipelineOrder& order,
                               const OverlapSet& overlap, const std::vector<double>& optimizer_s, const RankMap* ranks,
                               const ExpertLoadDraw* loads, bool share_links,
                               const std::function<void(const char*, double)>& progress) {
  SimResult out;
  out.share_links = share_links;
  out.whole = ranks != nullptr;
  out.schedule = order.schedule;
  out.overlap = overlap;
  StepGraphSpec spec;
  spec.work = &work;
  spec.model = &model;
  spec.order = &order;
  spec.overlap = overlap;
  spec.optimizer_s = optimizer_s;
  spec.ranks = ranks;
  spec.loads = loads;
  spec.share_links = share_links;
  if (progress) spec.progress = [&progress](double share) { progress("building", share); };
  auto graph = BuildStepGraph(spec);
  if (!graph.ok()) return graph.status();
  out.graph = std::move(graph).value();
  std::function<void(double)> running;
  if (progress) running = [&progress](double share) { progress("running", share); };
  auto run = RunTaskGraph(out.graph.graph, running);
  if (!run.ok()) return run.status();
  out.run = std::move(run).value();
  const TaskGraph& g = out.graph.graph;
  out.tasks = g.size();
  out.events = out.run.events;
  out.slowed_by_links = out.run.slowed_by_links;
  out.step_time_s = ToSeconds(out.run.makespan_ns);

  SimNs first_start = out.run.makespan_ns, pipeline_end = 0;
  for (const PassRecord& r : out.graph.passes) {
    first_start = std::min(first_start, out.run.start_ns[r.first_task]);
    pipeline_end = std::max(pipeline_end, out.run.end_ns[r.last_task]);
  }
  if (out.graph.passes.empty()) first_start = 0;
  out.pipeline_start_s = ToSeconds(first_start);
  out.pipeline_s = ToSeconds(pipeline_end - first_start);
  uint32_t slowest_opt = out.graph.optimizer.empty() ? 0 : out.graph.optimizer.front();
  for (uint32_t id : out.graph.optimizer) {
    if (out.run.end_ns[id] >= out.run.end_ns[slowest_opt]) slowest_opt = id;
  }
  if (!out.graph.optimizer.empty()) {
    out.optimizer_s = ToSeconds(out.run.end_ns[slowest_opt] - out.run.start_ns[slowest_opt]);
  }
  out.host_step_s = ToSeconds(ToSimNs(work.host.step_syncs * work.host.sync_s));
  out.dp_exposed_s = std::max(0.0, out.step_time_s - out.pipeline_s - out.optimizer_s - out.host_step_s);

  std::vector<std::vector<uint32_t>> per_rank(static_cast<size_t>(g.ranks()));
  for (uint32_t id = 0; id < g.size(); ++id) {
    const int32_t* mem = g.members(id);
    for (uint32_t k = 0; k < g.task(id).member_count; ++k) per_rank[static_cast<size_t>(mem[k])].push_back(id);
  }
  out.ranks.resize(static_cast<size_t>(g.ranks()));
  double idle_in_pipeline = 0;
  for (size_t p = 0; p < out.ranks.size(); ++p) {
    SimRankStats& st = out.ranks[p];
    st.rank = static_cast<int>(p);
    st.pipeline_rank = ranks ? ranks->coords(static_cast<int>(p)).pp : static_cast<int>(p);
    SweepRank(g, out.run, per_rank[p], first_start, pipeline_end, st);
    st.idle_s = out.step_time_s - st.busy_s;
    idle_in_pipeline += st.pipeline_idle_s;
  }
  out.bubble_fraction = out.pipeline_s > 0 ? idle_in_pipeline / (out.ranks.size() * out.pipeline_s) : 0;
  out.critical_path = CriticalPath(out.graph, out.run, out.critical_s);
  return out;
}

namespace {

// What Simulate and EstimateSimulation share: the layout's analytical
// evaluation and work, and the run's size, before anything grows with it.
struct Prepared {
  Evaluation analytical;
  StepWork work;
  long long microbatches = 0;
  bool whole = false;
  SimEstimate estimate;
};

Result<Prepared> Prepare(const CostModel& model, const Layout& input, const SimOptions& options) {
  // A schedule asked for is the layout's: its pipeline (DualPipeV's V), its
  // analytical step and its memory follow it.
  Layout with_schedule = input;
  if (options.schedule) with_schedule.schedule = *options.schedule;
  Prepared out;
  out.analytical = model.Evaluate(with_schedule);
  const Layout& layout = out.analytical.layout;
  const JobSpec& job = *model.context().job;
  const int pp = std::max(1, layout.pp), vpp = std::max(1, layout.vpp);
  out.microbatches = MicroBatchesPerStep(job, layout);
  // The order's shape (its passes come later, once the size is known):
  // 2 pp micro-batches run under every schedule the degrees allow.
  auto shape = BuildPipelineOrder(out.analytical.pipeline.schedule, pp, vpp, std::max<long long>(1, 2LL * pp));
  if (!shape.ok()) return shape.status();
  out.work = model.Work(layout, out.analytical.pipeline);
  out.whole = options.every_rank();
  const long long lanes = out.whole ? std::max(1, layout.world) / pp : 1;
  StepGraphSpec spec;
  spec.work = &out.work;
  spec.model = model.context().model;
  spec.order = &shape.value();
  spec.overlap = ResolveOverlap(options.overlap, out.analytical.pipeline.schedule);
  auto bound = BoundStepGraph(spec, out.microbatches, lanes);
  if (!bound.ok()) return bound.status();
  out.estimate = EstimateFromBound(bound.value(), out.whole, lanes * pp, out.microbatches, options.trace);
  return out;
}

}  // namespace

Result<SimEstimate> EstimateSimulation(const CostModel& model, const Layout& layout, const SimOptions& options) {
  auto prepared = Prepare(model, layout, options);
  if (!prepared.ok()) return prepared.status();
  return prepared->estimate;
}

Result<SimResult> Simulate(const CostModel& model, const Layout& input, const SimOptions& options) {
  auto ready = Prepare(model, input, options);
  if (!ready.ok()) return ready.status();
  Prepared prepared = std::move(ready).value();
  if (Status s = CheckSimulationSize(prepared.estimate, options.max_task_slots); !s.ok()) return s;
  Evaluation analytical = std::move(prepared.analytical);
  StepWork& work = prepared.work;
  work.pipeline = &analytical.pipeline;  // it pointed into Prepare's copy
  const Layout& layout = analytical.layout;
  const PipelineDescription& pipe = analytical.pipeline;
  const PipelineSchedule schedule = pipe.schedule;
  const JobSpec& job = *model.context().job;
  auto order = BuildPipelineOrder(schedule, std::max(1, layout.pp), std::max(1, layout.vpp), prepared.microbatches);
  if (!order.ok()) return order.status();
  std::vector<double> optimizer_s;
  for (int p = 0; p < work.pp; ++p) optimizer_s.push_back(model.OptimizerSeconds(layout, pipe, p));
  // The whole path: the rank map's groups, and the loads drawn.
  std::optional<RankMap> rank_map;
  std::optional<ExpertLoadDraw> loads;
  const ModelSpec& spec = *model.context().model;
  if (prepared.whole) {
    auto map = BuildRankMap(layout, *model.context().cluster, RankMapOptionsFor(&spec));
    if (!map.ok()) return map.status();
    rank_map = std::move(map).value();
    if (!options.imbalance.balanced() && spec.is_moe()) {
      const double rows = double(layout.mbs) * job.seq_len / (double(layout.tp) * layout.cp) * spec.moe->top_k;
      auto draw = ExpertLoadDraw::Create(options.imbalance, spec.moe->experts, layout.ep, rows, job.capacity_factor,
                                         options.seed);
      if (!draw.ok()) return draw.status();
      loads = std::move(draw).value();
    }
  }
  auto sim = SimulateWork(work, spec, order.value(), ResolveOverlap(options.overlap, schedule), optimizer_s,
                          rank_map ? &*rank_map : nullptr, loads ? &*loads : nullptr, options.share_links,
                          options.progress);
  if (!sim.ok()) return sim.status();
  SimResult out = std::move(sim).value();
  RankLoads rank_loads;
  rank_loads.map = rank_map ? &*rank_map : nullptr;
  rank_loads.draw = loads ? &*loads : nullptr;
  rank_loads.costed = work.load_factor;
  out.loads_drawn = loads.has_value();
  MemoryTimelines(model, layout, pipe, order.value(), out.graph, out.run, rank_loads, out.ranks);
  if (out.step_time_s > 0) {
    out.tokens_per_s = double(job.global_batch) * job.seq_len / out.step_time_s;
    out.mfu = analytical.step.mfu * analytical.step.step_time_s / out.step_time_s;
  }
  out.analytical = std::move(analytical);
  return out;
}

}  // namespace foldplan
