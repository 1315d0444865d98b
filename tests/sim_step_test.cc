// The simulated step (sim/simulate.h) against the analytical one
// (costmodel/schedule.h), and its bookkeeping.
#include <doctest/doctest.h>

#include <cstdio>

#include "../tests/fixtures.h"
#include "inputs/loader.h"
#include "costmodel/schedule.h"
#include "sim/simulate.h"

using namespace foldplan;

namespace {

// Hand-made work on a uniform pipeline: every decoder layer costs f forward
// and b backward, with one plain per-layer op of c seconds a call (a call
// each way), the embedding and the loss cost nothing, and a stage crossing
// costs s a call each way. Each rank holds L = layers / pp layers, so
//   t = L (f + b + 2c) + (pp > 1 ? 2 s : 0)   per micro-batch on every rank.
struct UniformWork {
  ModelSpec model = testing::MakeMixtral();  // 32 layers, every one MoE
  Layout layout;
  PipelineDescription pipe;
  StepWork work;
  UniformWork(int pp, int vpp, long long m, double f, double b, double c, double s,
              std::optional<PipelineSchedule> schedule = std::nullopt) {
    layout.pp = pp;
    layout.vpp = vpp;
    layout.world = pp;
    layout.schedule = schedule;
    pipe = DescribePipeline(layout, model);
    ComputeTimes t;
    t.moe_layer.routed_experts.fwd_s = f;
    t.moe_layer.routed_experts.bwd_s = b;
    std::vector<CommOp> ops(1);
    ops[0].kind = CommKind::kTensorParallel;
    ops[0].name = "tp_op";
    ops[0].scope = CommOp::kPerLayer;
    ops[0].calls_fwd = ops[0].calls_bwd = 1;
    ops[0].seconds_per_call = c;
    if (s > 0) {
      CommOp& send = ops.emplace_back();
      send.kind = CommKind::kPipeline;
      send.name = "pp_send_recv";
      send.scope = CommOp::kPerStageBoundary;
      send.calls_fwd = send.calls_bwd = 1;
      send.seconds_per_call = s;
    }
    GpuSpec gpu;
    work = BuildStepWork(layout, model, gpu, pipe, t, ops, m);
  }
  SimResult Simulate(bool pp_overlap, bool host_ahead = false) const {
    auto order = BuildPipelineOrder(pipe.schedule, layout.pp, layout.vpp, work.microbatches);
    REQUIRE(order.ok());
    OverlapSet off;
    off.tp = off.cp = off.ep = off.dp = false;
    off.pp = pp_overlap;
    off.host = host_ahead;
    auto r = SimulateWork(work, model, order.value(), off, {});
    REQUIRE(r.ok());
    return std::move(r).value();
  }
};

// Rounding: every task's seconds become whole nanoseconds, so a path of n
// tasks may be n/2 ns off; 1 us is far below any figure reported.
constexpr double kNs = 1e-6;

}  // namespace

TEST_CASE("uniform stages, no crossing cost: the simulated 1F1B and interleaved pipelines equal the analytical ones") {
  // 1F1B: (m + pp - 1) t; interleaved: m t + (pp - 1) / vpp t
  // (costmodel/schedule.h), the steady state at the stage time and the fill
  // and drain at (pp - 1) / vpp stages' worth.
  for (int pp : {1, 2, 4, 8}) {
    for (int vpp : {1, 2, 4}) {
      if (vpp > 1 && pp == 1) continue;
      for (long long m : {8LL, 16LL, 64LL}) {
        CAPTURE(pp);
        CAPTURE(vpp);
        CAPTURE(m);
        const UniformWork u(pp, vpp, m, 1e-3, 2e-3, 1e-4, 0);
        const double t = 32.0 / pp * (1e-3 + 2e-3 + 2e-4);
        const PipelineTimes a = SchedulePipeline(u.work);
        CHECK(a.stage_time_s == doctest::Approx(t).epsilon(1e-12));
        const SimResult s = u.Simulate(vpp > 1);
        CHECK(std::abs(s.pipeline_s - a.pipeline_s) < kNs);
        CHECK(std::abs(s.pipeline_s - (m * t + (pp - 1.0) / vpp * t)) < kNs);
        // The bubble: (pp - 1) / vpp stage times of idle on each rank, over
        // the pipeline: (pp - 1) / (vpp m + pp - 1).
        CHECK(s.bubble_fraction == doctest::Approx((pp - 1.0) / (vpp * m + pp - 1.0)).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("the host: not running ahead, each block takes max(host, GPU) and its syncs, as the analytical model") {
  // One rank, 32 MoE layers of f = 1 ms forward, b = 2 ms backward, a
  // 0.1 ms op each way; the host takes 1.5 ms to launch a forward (one
  // sync of 20 us) and 1 ms a backward. Per micro-batch:
  //   t = 32 (max(1.5, 1.1) + 0.02 + max(1, 2.1)) = 32 x 3.62 = 115.84 ms,
  // and the pipeline m t.
  UniformWork u(1, 1, 8, 1e-3, 2e-3, 1e-4, 0);
  HostBlock& h = u.work.host.block[static_cast<size_t>(BlockKind::kMoeLayer)];
  h.forward = {1.5e-3, 1e-3, 0, 1};
  h.backward = {1e-3, 1e-3, 0, 0};
  u.work.host.sync_s = 20e-6;
  const PipelineTimes a = SchedulePipeline(u.work);
  CHECK(a.stage_time_s == doctest::Approx(115.84e-3).epsilon(1e-12));
  const SimResult off = u.Simulate(false, false);
  CHECK(std::abs(off.pipeline_s - a.pipeline_s) < kNs);
  // The GPU waits 0.4 ms for each forward's launches and idles 20 us at
  // each sync: exposed host, not bubble.
  CHECK(off.bubble_fraction == 0);
  CHECK(off.ranks[0].exposed_s[static_cast<size_t>(SimKind::kHost)] ==
        doctest::Approx(8 * 32 * (0.4e-3 + 20e-6)).epsilon(1e-6));
}

TEST_CASE("the host running ahead: a host faster than its GPU costs the first launch only; after a sync it launches from behind") {
  // The same layers, the host at 0.5 ms a forward and a backward, no sync:
  // it stays ahead, and the GPU waits only for the first task's launch
  // (0.5 ms over the forward's two tasks: 0.25 ms) once per step.
  UniformWork u(1, 1, 8, 1e-3, 2e-3, 1e-4, 0);
  const double gpu = SchedulePipeline(u.work).pipeline_s;
  HostBlock& h = u.work.host.block[static_cast<size_t>(BlockKind::kMoeLayer)];
  h.forward = {0.5e-3, 0.5e-3, 0, 0};
  h.backward = {0.5e-3, 0.5e-3, 0, 0};
  const SimResult ahead = u.Simulate(false, true);
  CHECK(std::abs(ahead.step_time_s - (gpu + 0.25e-3)) < kNs);
  // Without the op (each pass one task per block) and with a sync ending
  // each forward: the host waits for the block to drain, the round trip
  // (20 us), then launches the next block (0.5 ms), which the GPU waits
  // for. Each of the 8 x 32 forwards costs 0.52 ms more, and the step's
  // first launch 0.5 ms: the GPU-only step + 8 x 32 x 0.52 + 0.5 ms. (The
  // backward passes' launches, 0.5 ms against 2 ms of GPU, hide, and so
  // does the first forward's after a backward.)
  UniformWork v(1, 1, 8, 1e-3, 2e-3, 0, 0);
  const double gpu_only = SchedulePipeline(v.work).pipeline_s;
  HostBlock& g = v.work.host.block[static_cast<size_t>(BlockKind::kMoeLayer)];
  g.forward = {0.5e-3, 0.5e-3, 0, 1};
  g.backward = {0.5e-3, 0.5e-3, 0, 0};
  v.work.host.sync_s = 20e-6;
  const SimResult synced = v.Simulate(false, true);
  CHECK(std::abs(synced.step_time_s - (gpu_only + 8 * 32 * 0.52e-3 + 0.5e-3)) < kNs);
}

namespace {

// Hand-made MoE layers for EP overlap: each of Mixtral's 32 layers, all on
// one rank, runs its attention (A_f forward, A_b backward) and its experts
// (X_f, X_b; no weight gradients, so nothing is deferred) with a dispatch
// of d and a combine of c seconds a call, one call each way, overlapped
// with the other micro-batch.
struct PairedWork {
  ModelSpec model = testing::MakeMixtral();
  Layout layout;
  PipelineDescription pipe;
  StepWork work;
  PairedWork(long long m, double a_f, double x_f, double x_b, double a_b, double d, double c) {
    layout.world = 1;
    pipe = DescribePipeline(layout, model);
    ComputeTimes t;
    t.moe_layer.attention_core = {0, a_f, a_b};
    t.moe_layer.expert_activation = {0, x_f, x_b};
    std::vector<CommOp> ops(2);
    for (CommOp& op : ops) {
      op.kind = CommKind::kExpertParallel;
      op.group = GroupKind::kEp;
      op.collective = Collective::kAllToAll;
      op.scope = CommOp::kPerMoeLayer;
      op.calls_fwd = op.calls_bwd = 1;
      op.hides_behind_other_microbatch = true;
    }
    ops[0].name = "moe_dispatch";
    ops[0].seconds_per_call = d;
    ops[1].name = "moe_combine";
    ops[1].seconds_per_call = c;
    ops[1].combine = true;
    GpuSpec gpu;
    work = BuildStepWork(layout, model, gpu, pipe, t, ops, m);
  }
  // Megatron's combined 1F1B without a pipeline (schedules.py's
  // combined_1f1b_schedule_for_no_pipelining): F0, then F(i + 1) beside
  // B(i), then B(m - 1) alone; EP overlap on as the ops say, every other
  // overlap off.
  SimResult Simulate(bool host_ahead) const {
    PipelineOrder order;
    order.microbatches = work.microbatches;
    order.ranks.resize(1);
    auto pass = [](PassKind kind, long long mb) {
      PipelinePass p;
      p.kind = kind;
      p.microbatch = static_cast<int>(mb);
      return p;
    };
    order.ranks[0].push_back(pass(PassKind::kForward, 0));
    for (long long i = 0; i + 1 < work.microbatches; ++i) {
      order.ranks[0].push_back(pass(PassKind::kForward, i + 1));
      order.ranks[0].push_back(pass(PassKind::kBackward, i));
    }
    order.ranks[0].push_back(pass(PassKind::kBackward, work.microbatches - 1));
    OverlapSet o;
    o.tp = o.cp = o.dp = false;
    o.host = host_ahead;
    auto r = SimulateWork(work, model, order, o, {});
    REQUIRE(r.ok());
    return std::move(r).value();
  }
};

}  // namespace

TEST_CASE("EP overlap, simulated: a paired layer runs four phases, each all-to-all beside one compute phase") {
  // Per layer A_f = 1, X_f = 1.5, X_b = 3, A_b = 2 ms, d = 2, c = 1.2 ms.
  // The steady pair of one layer (doc/cost-model.md "EP overlap, phase by
  // phase"): max(A_f, c) + max(X_b, d) + max(X_f, d) + max(A_b, c) =
  // 1.2 + 3 + 2 + 2 = 8.2 ms against 7.5 ms of compute: 0.7 ms exposed
  // (the whole block's 7.5 ms would have hidden all 6.4 ms of all-to-all).
  // Alone, F0 runs its layers in 1 + 2 + 1.5 + 1.2 = 5.7 ms and B(m - 1)
  // in 1.2 + 3 + 2 + 2 = 8.2 ms. With m = 8 the simulated order takes
  //   32 (5.7 + 7 x 8.2 + 8.2) = 32 x 71.3 ms = 2281.6 ms,
  // the analytical model's m t with one micro-batch alone (1F1B's pp - p):
  //   8 x 32 (7.5 + (6.4 + 7 x 0.7) / 8), the same.
  const PairedWork w(8, 1e-3, 1.5e-3, 3e-3, 2e-3, 2e-3, 1.2e-3);
  const PipelineTimes a = SchedulePipeline(w.work);
  CHECK(a.pipeline_s == doctest::Approx(32 * 71.3e-3).epsilon(1e-12));
  // The simulator is 6 x 0.2 ms shorter: where one pair follows another,
  // the next backward's first combine gradient waits only for its forward
  // and the EP stream, so it starts beside the last pair's last attention
  // backward (0.8 ms before that ends: A_b 2 against the combine's 1.2) and
  // phase 0 then takes A_f = 1 ms, not 1.2 (the analytical model pairs
  // each layer's phases alone). F0 and B(7), alone, run their all-to-alls
  // on the compute stream.
  const SimResult s = w.Simulate(false);
  CHECK(std::abs(s.pipeline_s - (a.pipeline_s - 6 * 0.2e-3)) < kNs);
  // Without EP overlap every all-to-all is exposed in its own pass: m x 32
  // x (7.5 + 6.4) ms, simulated and analytical alike.
  PairedWork off = w;
  for (CommOp& op : off.work.ops) op.hides_behind_other_microbatch = false;
  CHECK(SchedulePipeline(off.work).pipeline_s == doctest::Approx(8 * 32 * 13.9e-3).epsilon(1e-12));
  CHECK(std::abs(off.Simulate(false).pipeline_s - 8 * 32 * 13.9e-3) < kNs);
}

TEST_CASE("EP overlap, simulated: one host thread issues both passes of a pair, as the analytical model counts it") {
  // The layers above with a host that issues a layer's forward in 5 ms and
  // its backward in 4.5 ms, one sync of 0.1 ms per forward. Alone, each
  // pass's GPU time (5.7, 8.2 ms) covers its host's. In a pair one thread
  // issues both, 9.5 ms, against the pair's 8.2 ms of GPU time: the pair
  // takes max(9.5, 8.2) + 0.1 = 9.6 ms. With the host not running ahead
  // (`--overlap host=0`: a block's launches start with it; a paired
  // block's fence waits on the host stream) the simulated order takes
  //   32 (5.7 + 0.1 + 7 x 9.6 + 8.2) = 32 x 81.2 ms = 2598.4 ms,
  // and the analytical model, per layer and micro-batch, 7.5 ms of compute,
  // (6.4 + 7 x 0.7) / 8 of all-to-all and (7 x 1.3) / 8 + 0.1 of host:
  // 8 x 32 x (8.9125 + 1.2375) ms, the same.
  PairedWork w(8, 1e-3, 1.5e-3, 3e-3, 2e-3, 2e-3, 1.2e-3);
  HostBlock& h = w.work.host.block[static_cast<size_t>(BlockKind::kMoeLayer)];
  h.forward = {5e-3, 5e-3, 0, 1};
  h.backward = {4.5e-3, 4.5e-3, 0, 0};
  w.work.host.sync_s = 0.1e-3;
  const PipelineTimes a = SchedulePipeline(w.work);
  CHECK(a.ranks[0].host_exposed_s == doctest::Approx(32 * (7 * 1.3e-3 / 8 + 0.1e-3)).epsilon(1e-12));
  CHECK(a.pipeline_s == doctest::Approx(32 * 81.2e-3).epsilon(1e-12));
  const SimResult s = w.Simulate(false);
  CHECK(std::abs(s.pipeline_s - a.pipeline_s) < kNs);
  // Running ahead the host issues on through the lone passes, where the GPU
  // is the slower, and catches less of the pairs: never slower than not.
  CHECK(w.Simulate(true).pipeline_s <= s.pipeline_s + kNs);
}

TEST_CASE("uniform 1F1B with blocking crossings: the simulator charges only the sends that exist") {
  // The analytical 1F1B charges every rank a crossing each way per
  // micro-batch, t = t0 + 2s (t0 = L (f + b + 2c)). A rank sends only to
  // a neighbour that exists: with pp = 2 each rank sends one way, t = t0 + s
  // on both, so the simulated pipeline is (m + 1)(t0 + s), (m + 1) s below
  // the analytical (m + 1)(t0 + 2s).
  const double f = 1e-3, b = 2e-3, c = 1e-4, s = 5e-4;
  for (long long m : {4LL, 16LL, 64LL}) {
    CAPTURE(m);
    const UniformWork u(2, 1, m, f, b, c, s);
    const double t0 = 16 * (f + b + 2 * c);
    const SimResult r = u.Simulate(false);
    CHECK(std::abs(r.pipeline_s - (m + 1) * (t0 + s)) < kNs);
    CHECK(std::abs(SchedulePipeline(u.work).pipeline_s - r.pipeline_s - (m + 1) * s) < kNs);
  }
  // pp > 2: the middle ranks send both ways (t0 + 2s, the analytical t)
  // and set the steady state; only the fill and drain gain from the end
  // ranks' missing sends, so the simulated pipeline lies between m (t0 + 2s)
  // and the analytical (m + pp - 1)(t0 + 2s).
  for (int pp : {4, 8}) {
    for (long long m : {8LL, 32LL}) {
      CAPTURE(pp);
      CAPTURE(m);
      const UniformWork u(pp, 1, m, f, b, c, s);
      const double t = 32.0 / pp * (f + b + 2 * c) + 2 * s;
      const PipelineTimes a = SchedulePipeline(u.work);
      CHECK(a.pipeline_s == doctest::Approx((m + pp - 1) * t));
      const SimResult r = u.Simulate(false);
      CHECK(r.pipeline_s <= a.pipeline_s + kNs);
      CHECK(r.pipeline_s >= m * t - kNs);
      // Of the analytical model's 2 (m + pp - 1) crossings per rank, the
      // simulated step saves at most the end ranks' m + pp - 1 each.
      CHECK(a.pipeline_s - r.pipeline_s <= 2 * (m + pp - 1) * s + kNs);
    }
  }
}

TEST_CASE("busy time adds up: compute never overlaps itself, communication is counted once per kind") {
  // On every rank: the compute stream's tasks do not overlap, so the time
  // with compute running is the sum of the compute tasks' durations; each
  // kind's communication time is the sum of its tasks'; busy = compute +
  // the exposed communication of every kind; busy + idle = step.
  const UniformWork u(4, 2, 16, 1e-3, 2e-3, 1e-4, 5e-4);
  for (bool pp_overlap : {false, true}) {
    const SimResult r = u.Simulate(pp_overlap);
    const TaskGraph& g = r.graph.graph;
    for (const SimRankStats& st : r.ranks) {
      double compute = 0;
      std::array<double, kSimKindCount> comm{};
      for (uint32_t id = 0; id < g.size(); ++id) {
        if (g.members(id)[0] != st.pipeline_rank) continue;
        const double d = ToSeconds(r.run.end_ns[id] - r.run.start_ns[id]);
        if (g.task(id).kind == SimKind::kCompute) compute += d;
        else comm[static_cast<size_t>(g.task(id).kind)] += d;
      }
      CHECK(st.compute_s == doctest::Approx(compute).epsilon(1e-12));
      double exposed = 0;
      for (int k = 1; k < kSimKindCount; ++k) {
        CHECK(st.comm_s[static_cast<size_t>(k)] == doctest::Approx(comm[static_cast<size_t>(k)]).epsilon(1e-12));
        exposed += st.exposed_s[static_cast<size_t>(k)];
      }
      CHECK(st.busy_s == doctest::Approx(st.compute_s + exposed).epsilon(1e-9));
      CHECK(st.busy_s + st.idle_s == doctest::Approx(r.step_time_s).epsilon(1e-12));
    }
  }
}

TEST_CASE("the critical path runs from the step's start to its end without gaps") {
  // Each task on it starts when its predecessor on it ends (that is what
  // made it critical), so the segments tile [0, step].
  const UniformWork u(4, 1, 16, 1e-3, 2e-3, 1e-4, 5e-4);
  const SimResult r = u.Simulate(false);
  REQUIRE_FALSE(r.critical_path.empty());
  CHECK(r.critical_path.front().start_s == 0);
  double at = 0, total = 0;
  for (const CriticalSegment& c : r.critical_path) {
    CHECK(c.start_s == doctest::Approx(at).epsilon(1e-12));
    at = c.start_s + c.duration_s;
  }
  for (double k : r.critical_s) total += k;
  CHECK(at == doctest::Approx(r.step_time_s).epsilon(1e-12));
  CHECK(total == doctest::Approx(r.step_time_s).epsilon(1e-9));
}

namespace {

// The shipped Mixtral 8x22B on 16 DGX H100 nodes, with a small global batch
// so that a step has few micro-batches.
struct Shipped {
  ClusterSpec cluster = LoadCluster("h100-dgx-16n").value();
  ModelSpec model = LoadModel("mixtral-8x22b").value();
  JobSpec job = [] {
    JobSpec j = LoadJob("default").value();
    j.global_batch = 128;
    return j;
  }();
  std::unique_ptr<CostModel> cost = std::move(CostModel::Create(cluster, model, job)).value();

  SimResult Run(const std::string& text, const OverlapOptions& overlap) {
    auto l = ParseLayout(text, cluster.total_gpus(), &job);
    REQUIRE(l.ok());
    SimOptions o;
    o.overlap = overlap;
    auto r = Simulate(*cost, l.value(), o);
    REQUIRE(r.ok());
    return std::move(r).value();
  }
};

OverlapOptions AllOff() {
  OverlapOptions o;
  o.tp = o.cp = o.ep = o.dp = o.pp = o.host = false;
  return o;
}

}  // namespace

TEST_CASE("one stage, every overlap off: the simulated pipeline is the analytical m t exactly") {
  // pp = 1: no fill, no drain, no crossing; t is the rank's compute and
  // communication per micro-batch, all of it exposed on both sides. The
  // data-parallel traffic, blocking, adds gather + reduction outside it.
  Shipped f;
  for (const char* text : {"tp=8,cp=1,pp=1,ep=8,etp=1", "tp=4,cp=2,pp=1,ep=8,etp=1", "tp=2,cp=4,pp=1,ep=16,etp=1"}) {
    CAPTURE(text);
    const SimResult r = f.Run(text, AllOff());
    const StepWork w = f.cost->Work(r.analytical.layout, r.analytical.pipeline);
    StepWork off = w;
    for (CommOp& op : off.ops) op.overlappable = op.hides_behind_other_microbatch = false;
    const PipelineTimes a = SchedulePipeline(off);
    // Rounding: at most half a nanosecond per task on the path.
    const double rounding = 0.5e-9 * double(r.tasks);
    CHECK(std::abs(r.pipeline_s - a.pipeline_s) < rounding);
    double dp = 0;
    for (const CommOp& op : w.ops) {
      if (op.scope == CommOp::kPerStep) dp += op.seconds_per_microbatch();
    }
    CHECK(std::abs(r.dp_exposed_s - dp) < rounding);
    CHECK(r.bubble_fraction == 0);
  }
}

TEST_CASE("1F1B and interleaved layouts, every overlap off: the simulated pipeline is within the analytical model's simplifications") {
  // The analytical pipeline m t_max + (pp - 1) / vpp t_max (+ crossings)
  // counts the fill and drain at the slowest stage's time; the simulated
  // one runs each stage at its own. It is at least the slowest rank's busy
  // time m t_max and at most the analytical pipeline plus, for interleaved
  // stages whose chunks differ (the embedding's, the loss's), one fill's
  // worth of a chunk: (pp - 1) / vpp t_max more.
  Shipped f;
  for (const char* text : {"tp=2,cp=1,pp=8,ep=8,etp=1", "tp=4,cp=1,pp=4,ep=8,etp=1", "tp=2,cp=2,pp=4,vpp=2,ep=8,etp=1",
                           "tp=1,cp=4,pp=4,vpp=2,ep=8,etp=1", "tp=2,cp=1,pp=2,ep=8,etp=1"}) {
    CAPTURE(text);
    const SimResult r = f.Run(text, AllOff());
    const StepBreakdown& a = r.analytical.step;
    const StepWork w = f.cost->Work(r.analytical.layout, r.analytical.pipeline);
    StepWork off = w;
    for (CommOp& op : off.ops) op.overlappable = op.hides_behind_other_microbatch = false;
    const PipelineTimes t = SchedulePipeline(off);
    const int pp = r.analytical.layout.pp, vpp = r.analytical.layout.vpp;
    CHECK(r.pipeline_s >= a.microbatches * t.stage_time_s * (1 - 1e-9));
    CHECK(r.pipeline_s <= t.pipeline_s + (pp - 1.0) / vpp * t.stage_time_s);
  }
}

TEST_CASE("the simulated peak memory is the memory model's where the chunks in flight agree") {
  // 1F1B keeps pp - p micro-batches on rank p at the peak, interleaved
  // 2 (pp - p - 1) + (vpp - 1) pp + 1 chunks (InflightMicrobatches); the
  // simulated order holds as many, so its peak is the memory model's.
  Shipped f;
  for (const char* text : {"tp=2,cp=1,pp=8,ep=8,etp=1", "tp=2,cp=2,pp=4,vpp=2,ep=8,etp=1"}) {
    CAPTURE(text);
    const SimResult r = f.Run(text, {});
    for (const SimRankStats& st : r.ranks) {
      CAPTURE(st.pipeline_rank);
      CHECK(st.peak_inflight_microbatches == doctest::Approx(st.model_inflight_microbatches));
      CHECK(st.peak_memory_bytes == doctest::Approx(st.model_peak_memory_bytes).epsilon(1e-9));
      CHECK(st.peak_memory_at_s > 0);
    }
  }
}

TEST_CASE("overlaps hide what they overlap: the default recipe's step is no longer than all-off") {
  Shipped f;
  const SimResult off = f.Run("tp=2,cp=1,pp=4,vpp=2,ep=8,etp=1,tp_overlap=1", AllOff());
  const SimResult on = f.Run("tp=2,cp=1,pp=4,vpp=2,ep=8,etp=1,tp_overlap=1", {});
  CHECK(on.step_time_s < off.step_time_s);
  // With TP comm overlap on, less TP time is exposed on every rank.
  for (size_t p = 0; p < on.ranks.size(); ++p) {
    CHECK(on.ranks[p].exposed_s[static_cast<size_t>(SimKind::kTp)] <
          off.ranks[p].exposed_s[static_cast<size_t>(SimKind::kTp)]);
  }
}

TEST_CASE("balanced loads: the whole path (every rank) gives the fast path's step time") {
  // Every rank of a stage walks the same items with the same durations, so
  // each collective's members arrive together and nothing waits: the same
  // timeline on every rank as on the stage's representative.
  Shipped f;
  for (const char* text : {"tp=2,cp=1,pp=4,ep=8,etp=1", "tp=2,cp=2,pp=2,vpp=2,ep=8,etp=1,a2a_overlap=1"}) {
    CAPTURE(text);
    auto l = ParseLayout(text, f.cluster.total_gpus(), &f.job);
    REQUIRE(l.ok());
    SimOptions fast, whole;
    whole.whole = true;
    auto a = Simulate(*f.cost, l.value(), fast), b = Simulate(*f.cost, l.value(), whole);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(b->whole);
    CHECK(b->ranks.size() == 128);
    CHECK(a->step_time_s == b->step_time_s);
    CHECK(a->pipeline_s == b->pipeline_s);
  }
}

TEST_CASE("routing imbalance: the all-to-all waits for its busiest member, and stragglers slow the step") {
  // Each EP group's dispatch lasts the costed time x its busiest member's
  // load (the costed load is 1 here: balanced routing); a rank's routed
  // experts compute scales with its own load.
  Shipped f;
  auto l = ParseLayout("tp=2,cp=1,pp=4,ep=8,etp=1", f.cluster.total_gpus(), &f.job);
  REQUIRE(l.ok());
  SimOptions balanced, skewed;
  skewed.imbalance = ParseLoadSpec("zipf:1").value();
  skewed.seed = 3;
  auto a = Simulate(*f.cost, l.value(), balanced), b = Simulate(*f.cost, l.value(), skewed);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(b->whole);
  CHECK(b->step_time_s > a->step_time_s);
  const TaskGraph& g = b->graph.graph;
  const StepWork w = f.cost->Work(b->analytical.layout, b->analytical.pipeline);
  double costed = 0;
  for (const CommOp& op : w.ops) {
    if (std::string(op.name) == "moe_dispatch") costed = op.calls_fwd * op.seconds_per_call;
  }
  int checked = 0;
  for (uint32_t id = 0; id < g.size() && checked < 50; ++id) {
    const SimTask& t = g.task(id);
    if (g.label(t.label) != "moe_dispatch" || t.pass != SimPass::kForward) continue;
    // 8 members, all ending together, lasting at least the costed time.
    CHECK(t.member_count == 8);
    CHECK(ToSeconds(t.work_ns) >= costed * (1 - 1e-6));
    ++checked;
  }
  CHECK(checked == 50);
  // The same seed, the same step; another seed, another.
  auto again = Simulate(*f.cost, l.value(), skewed);
  REQUIRE(again.ok());
  CHECK(again->step_time_s == b->step_time_s);
  skewed.seed = 4;
  auto other = Simulate(*f.cost, l.value(), skewed);
  REQUIRE(other.ok());
  CHECK(other->step_time_s != b->step_time_s);
}

TEST_CASE("ZB-H1 and DualPipeV on uniform stages: the simulated pipeline is the analytical one") {
  // Each layer: forward f = 1 ms, backward b = 2 ms of which the weight
  // gradients are W = f (a GEMM's wgrad costs its forward), so per rank of
  // L layers F = B = W = L ms, no communication. ZB-H1 (costmodel/
  // schedule.h): m (F + B + W) + (pp - 1)(F + B - min(F, B, W)) =
  // 3 m L + (pp - 1) L. DualPipeV with F = B = W, pairs of F and B run one
  // after the other: the formula costmodel/schedule.h derives from the
  // same order, exact at F = B = W.
  for (int pp : {2, 4, 8}) {
    for (long long m : {16LL, 32LL}) {
      CAPTURE(pp);
      CAPTURE(m);
      const UniformWork zb(pp, 1, m, 1e-3, 2e-3, 0, 0, PipelineSchedule::kZeroBubbleH1);
      const double l = 32.0 / pp * 1e-3;
      const SimResult r = zb.Simulate(false);
      CHECK(std::abs(r.pipeline_s - (3 * m * l + (pp - 1) * l)) < kNs);
      CHECK(std::abs(r.pipeline_s - SchedulePipeline(zb.work).pipeline_s) < kNs);
      const UniformWork dv(pp, 2, m, 1e-3, 2e-3, 0, 0, PipelineSchedule::kDualPipeV);
      const SimResult d = dv.Simulate(true);
      CHECK(std::abs(d.pipeline_s - SchedulePipeline(dv.work).pipeline_s) < kNs);
      // Both beat 1F1B's (m + pp - 1)(F + B + W) = 3 L (m + pp - 1).
      CHECK(r.pipeline_s < 3 * l * (m + pp - 1));
      CHECK(d.pipeline_s < 3 * l * (m + pp - 1));
    }
  }
}

TEST_CASE("GPipe holds every micro-batch at the peak, 1F1B pp - p: the simulated memory says so") {
  // GPipe runs all m forwards before any backward: m micro-batches of
  // activations on every rank at the peak (InflightMicrobatches), against
  // 1F1B's pp - p.
  Shipped f;
  auto l = ParseLayout("tp=2,cp=1,pp=4,ep=8,etp=1,schedule=gpipe", f.cluster.total_gpus(), &f.job);
  REQUIRE(l.ok());
  auto r = Simulate(*f.cost, l.value());
  REQUIRE(r.ok());
  const long long m = r->analytical.step.microbatches;
  for (const SimRankStats& st : r->ranks) {
    CHECK(st.peak_inflight_microbatches == doctest::Approx(double(m)));
    CHECK(st.model_inflight_microbatches == doctest::Approx(double(m)));
    CHECK(st.peak_memory_bytes == doctest::Approx(st.model_peak_memory_bytes).epsilon(1e-9));
  }
}

TEST_CASE("shared links: concurrent communication can only lengthen the step, and alone it changes nothing") {
  // Sharing a link slows a transfer only when the link is full, so the
  // step with shared links is at least the step without; with every
  // overlap off nothing runs beside anything, so the two are equal.
  Shipped f;
  auto l = ParseLayout("tp=2,cp=2,pp=4,vpp=2,ep=8,etp=1,a2a_overlap=1", f.cluster.total_gpus(), &f.job);
  REQUIRE(l.ok());
  SimOptions shared, free;
  free.share_links = false;
  auto a = Simulate(*f.cost, l.value(), shared), b = Simulate(*f.cost, l.value(), free);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->step_time_s >= b->step_time_s);
  shared.overlap = free.overlap = AllOff();
  auto c = Simulate(*f.cost, l.value(), shared), d = Simulate(*f.cost, l.value(), free);
  REQUIRE(c.ok());
  REQUIRE(d.ok());
  CHECK(c->step_time_s == d->step_time_s);
  CHECK(c->slowed_by_links == 0);
}

TEST_CASE("DualPipeV: the simulated memory in flight is the memory model's, pp + 1/2 stages on every rank") {
  // DualPipeV's order keeps 2 pp + 1 chunks alive at its peak on every rank
  // (sim/pipeline_order.h), each half a stage's layers: pp + 1/2 stage
  // equivalents, InflightMicrobatches' count, on the V's pipeline (within
  // 2%: the simulator weighs a chunk by its layers, which differ by one
  // where they do not split evenly over the chunks).
  Shipped f;
  auto l = ParseLayout("tp=2,cp=1,pp=4,vpp=2,ep=8,etp=1,schedule=dualpipev", f.cluster.total_gpus(), &f.job);
  REQUIRE(l.ok());
  auto r = Simulate(*f.cost, l.value());
  REQUIRE(r.ok());
  CHECK(r->schedule == PipelineSchedule::kDualPipeV);
  CHECK(r->overlap.ep == true);
  for (const SimRankStats& st : r->ranks) {
    CAPTURE(st.pipeline_rank);
    CHECK(st.model_inflight_microbatches == doctest::Approx(4.5));
    CHECK(st.peak_inflight_microbatches == doctest::Approx(st.model_inflight_microbatches).epsilon(0.02));
  }
}

TEST_CASE("shared-expert overlap: the shared experts run beside the dispatch, each MoE layer min(shared, dispatch) shorter") {
  // In a MoE block the dispatch all-to-all (d) and the shared experts'
  // compute (e) run one after the other, d + e; side by side max(d, e):
  // every MoE block of every pass is about min(d, e) shorter, so the step
  // is shorter. No rank computes less: beside the dispatch's NCCL kernel
  // (16 of the H100's 132 SMs) the shared experts run at 116 / 132, so
  // their compute stretches by at most 132 / 116 - 1 = 13.8 %.
  const ClusterSpec cluster = LoadCluster("h100-dgx-16n").value();
  const ModelSpec model = LoadModel("qwen2-57b-a14b").value();
  JobSpec job = LoadJob("default").value();
  job.global_batch = 128;
  auto cost = CostModel::Create(cluster, model, job);
  REQUIRE(cost.ok());
  auto l = ParseLayout("tp=2,cp=1,pp=4,ep=8,etp=1", cluster.total_gpus(), &job);
  REQUIRE(l.ok());
  SimOptions off, on;
  on.overlap.shared = true;
  auto a = Simulate(*cost.value(), l.value(), off), b = Simulate(*cost.value(), l.value(), on);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(b->overlap.shared);
  CHECK(b->step_time_s < a->step_time_s);
  for (size_t p = 0; p < a->ranks.size(); ++p) {
    CHECK(b->ranks[p].compute_s >= a->ranks[p].compute_s * (1 - 1e-9));
    CHECK(b->ranks[p].compute_s < a->ranks[p].compute_s * 132 / 116);
    CHECK(b->ranks[p].exposed_s[size_t(SimKind::kEp)] < a->ranks[p].exposed_s[size_t(SimKind::kEp)]);
  }
}
