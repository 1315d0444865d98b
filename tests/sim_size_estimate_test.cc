// A simulation's size, estimated before it is built (sim/sim_estimate.h):
// it bounds what the run builds, and a run above the limit is refused
// before anything grows; and each rank's memory under routing imbalance
// (sim/simulate.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "costmodel/evaluate.h"
#include "inputs/loader.h"
#include "planner/layout.h"
#include "planner/rank_map.h"
#include "costmodel/compute_time.h"
#include "sim/simulate.h"

using namespace foldplan;

namespace {

struct SizeInputs {
  ClusterSpec cluster = LoadCluster("h100-dgx-16n").value();
  ModelSpec model = LoadModel("mixtral-8x7b").value();
  JobSpec job;
  std::unique_ptr<CostModel> cost;
  explicit SizeInputs(long long global_batch) {
    job = LoadJob("default").value();
    job.global_batch = global_batch;
    cost = std::move(CostModel::Create(cluster, model, job)).value();
  }
  Layout LayoutOf(const std::string& text) const {
    auto l = ParseLayout(text, cluster.total_gpus(), &job);
    REQUIRE_MESSAGE(l.ok(), l.status().message());
    return l.value();
  }
};

// The members the graph holds (a collective's once per member).
double SizeMemberships(const TaskGraph& g) {
  double n = 0;
  for (uint32_t i = 0; i < g.size(); ++i) n += g.task(i).member_count;
  return n;
}

}  // namespace

TEST_CASE("the size estimate bounds every run's tasks, members, dependencies, passes and events") {
  SizeInputs in(128);
  struct Case {
    const char* layout;
    bool whole;
    const char* imbalance;
  };
  const Case cases[] = {
      {"tp=2,cp=1,pp=4,ep=8,etp=1", false, ""},
      {"tp=2,cp=1,pp=4,ep=8,etp=1,recompute=selective", true, ""},
      {"tp=2,cp=1,pp=4,ep=8,etp=1", false, "zipf:1"},
      {"tp=2,cp=2,pp=2,vpp=2,ep=8,etp=1,a2a_overlap=1", false, ""},
      {"tp=2,cp=1,pp=2,vpp=2,ep=8,etp=1,schedule=dualpipev", false, ""},
      {"tp=2,cp=1,pp=4,ep=8,etp=1,schedule=zb-h1,fsdp=1", false, "uniform"},
      {"tp=1,cp=1,pp=1,ep=8,etp=1", true, ""},
  };
  for (const Case& c : cases) {
    const std::string what = std::string(c.layout) + " " + c.imbalance;
    CAPTURE(what);
    SimOptions o;
    o.whole = c.whole;
    if (*c.imbalance) o.imbalance = ParseLoadSpec(c.imbalance).value();
    const Layout l = in.LayoutOf(c.layout);
    auto e = EstimateSimulation(*in.cost, l, o);
    REQUIRE_MESSAGE(e.ok(), e.status().message());
    auto r = Simulate(*in.cost, l, o);
    REQUIRE_MESSAGE(r.ok(), r.status().message());
    const TaskGraph& g = r->graph.graph;
    CHECK(double(g.size()) <= e->task_slots);
    CHECK(SizeMemberships(g) <= e->task_slots);
    CHECK(double(g.edge_count()) <= e->edges);
    CHECK(double(r->graph.passes.size()) <= e->passes);
    CHECK(double(r->events) <= e->events);
    CHECK(double(r->run.peak_queued) <= e->events);
    CHECK(e->ranks == int(r->ranks.size()));
    // A bound, not a guess: within a small factor of what was built.
    CHECK(SizeMemberships(g) >= e->task_slots / 4);
  }
}

TEST_CASE("a run whose estimate exceeds the limit is refused with the estimate, the limit and the flag") {
  // 16,777,216 sequences on dp 32 (128 GPUs, pp 4): 524,288 micro-batches,
  // each hundreds of tasks on 4 ranks, far beyond 2^24 task slots.
  SizeInputs in(16777216);
  const Layout l = in.LayoutOf("tp=1,cp=1,pp=4,ep=8,etp=1");
  auto e = EstimateSimulation(*in.cost, l);
  REQUIRE(e.ok());
  CHECK(e->microbatches == 524288);
  CHECK(e->task_slots > double(kDefaultMaxSimTaskSlots));
  auto r = Simulate(*in.cost, l);
  REQUIRE_FALSE(r.ok());
  const std::string& m = r.status().message();
  CHECK(m.find("M task slots") != std::string::npos);
  CHECK(m.find("16,777,216") != std::string::npos);
  CHECK(m.find("--max-tasks") != std::string::npos);
  // The same limit, a small step: it runs.
  SizeInputs small(128);
  CHECK(Simulate(*small.cost, small.LayoutOf("tp=1,cp=1,pp=4,ep=8,etp=1")).ok());
}

TEST_CASE("the whole path's estimate grows with the world: every rank is simulated") {
  SizeInputs in(128);
  const Layout l = in.LayoutOf("tp=2,cp=1,pp=4,ep=8,etp=1");
  SimOptions whole;
  whole.whole = true;
  auto fast = EstimateSimulation(*in.cost, l), every = EstimateSimulation(*in.cost, l, whole);
  REQUIRE(fast.ok());
  REQUIRE(every.ok());
  // 128 GPUs on pp 4: 32 lanes a stage, each walking the fast path's items.
  CHECK(every->ranks == 128);
  CHECK(every->task_slots == doctest::Approx(32 * fast->task_slots));
  whole.max_task_slots = static_cast<long long>(fast->task_slots);
  auto refused = Simulate(*in.cost, l, whole);
  CHECK_FALSE(refused.ok());
  CHECK(refused.status().message().find("simulate fewer ranks") != std::string::npos);
}

TEST_CASE("under imbalance each rank's peak memory follows the expert rows it received") {
  // pp 1, 1F1B: a micro-batch's forward then its backward, one micro-batch
  // of activations alive at a time. Balanced, the peak is B = base + f A
  // (A one micro-batch's activations, f = 1 + fragmentation). A rank whose
  // expert rows in micro-batch m and MoE layer l are x(l, m) times the
  // costed ones holds sum_l (x(l, m) - 1) X more (X one MoE layer's
  // expert-row bytes at the costed load), and its dispatch buffers
  // (max x - 1) D more (D their received part): its peak is
  //   B + f (max_m sum_l (x(l, m) - 1) X + (max_{l,m} x - 1) D).
  SizeInputs in(256);
  const Layout l = in.LayoutOf("tp=1,cp=1,pp=1,ep=8,etp=1");
  SimOptions balanced, skewed;
  skewed.imbalance = ParseLoadSpec("zipf:1.2").value();
  skewed.seed = 5;
  auto a = Simulate(*in.cost, l, balanced), b = Simulate(*in.cost, l, skewed);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  const MemoryModel& mem = in.cost->memory();
  const MemoryModel::ReceivedRowBytes per = mem.BytesOfReceivedRows(b->analytical.layout);
  CHECK(per.activations_per_moe_layer > 0);
  CHECK(per.dispatch > 0);
  const double frag = 1 + mem.assumptions().fragmentation;
  const double balanced_peak = a->ranks[0].peak_memory_bytes;
  const StepWork w = in.cost->Work(b->analytical.layout, b->analytical.pipeline);
  const JobSpec& job = in.job;
  const double rows = double(l.mbs) * job.seq_len / (double(l.tp) * l.cp) * in.model.moe->top_k;
  auto draw = ExpertLoadDraw::Create(skewed.imbalance, in.model.moe->experts, l.ep, rows, job.capacity_factor, 5);
  REQUIRE(draw.ok());
  auto ranks = BuildRankMap(b->analytical.layout, in.cluster, RankMapOptionsFor(&in.model));
  REQUIRE(ranks.ok());
  const Groups& ep = ranks->groups(GroupKind::kEp);
  const long long m = MicroBatchesPerStep(job, b->analytical.layout);
  int above = 0, below = 0;
  std::vector<double> f;
  for (size_t g = 0; g < ep.size(); ++g) {
    for (size_t i = 0; i < ep[g].size(); ++i) {
      double most = -1e300, x_max = 1;
      for (long long mb = 0; mb < m; ++mb) {
        double sum = 0;
        for (int layer = 0; layer < in.model.layers; ++layer) {
          if (!in.model.layer_is_moe(layer)) continue;
          draw->Draw(g, layer, int(mb), f);
          const double x = f[i] / w.load_factor;
          sum += (x - 1) * per.activations_per_moe_layer;
          x_max = std::max(x_max, x);
        }
        most = std::max(most, sum);
      }
      const double expected = balanced_peak + frag * (most + (x_max - 1) * per.dispatch);
      const SimRankStats& s = b->ranks[size_t(ep[g][i])];
      CAPTURE(s.rank);
      CHECK(s.peak_memory_bytes == doctest::Approx(expected).epsilon(1e-9));
      (s.peak_memory_bytes > balanced_peak * (1 + 1e-6) ? above : below) += 1;
    }
  }
  // zipf 1.2 over 8 ranks: some receive more than the mean, some less.
  CHECK(above > 0);
  CHECK(below > 0);
}
