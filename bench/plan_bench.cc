// Search speed: candidates scored per CPU second by the cost model (the
// default job as it was before it searched ring CP, EP overlap, FSDP and
// DeepEP, and the widened job), a layout at a time and a family at a time,
// and the full `plan` search (enumerate + score on 2 threads) for
// deepseek-v3 on 1,024, 16,384 and 131,072 H100 GPUs with the default job
// (BM_PlanDeepSeekV3) and the one before (BM_PlanDeepSeekV3Before).
#include <benchmark/benchmark.h>

#include <iostream>
#include <map>

#include "costmodel/evaluate.h"
#include "deepseek_inputs.h"
#include "planner/enumerate.h"
#include "planner/search.h"

namespace {

using namespace foldplan;

struct Setup {
  ClusterSpec cluster;
  ModelSpec model;
  JobSpec job;
  std::unique_ptr<CostModel> cost;
  std::vector<Layout> legal;
};

std::unique_ptr<CostModel> Create(const Setup& s) {
  auto cost = CostModel::Create(s.cluster, s.model, s.job);
  if (!cost.ok()) {
    std::cerr << cost.status().message() << "\n";
    std::exit(1);
  }
  return std::move(cost).value();
}

// The jobs: the shipped default job (what `plan` searches), the default
// job before it searched ring CP, EP overlap, FSDP and DeepEP
// (bench::DefaultJobBefore: the scoring benchmarks' job, as in
// doc/performance.md's figures), and the widened job.
enum class Job { kDefault, kBefore, kWidened };

// `legal`: with the legal layouts listed (the scoring benchmarks walk
// them; the search does not need them).
Setup& DeepSeekOn(int gpus, Job job, bool legal = true) {
  static std::map<std::pair<int, Job>, Setup> cache;
  auto it = cache.find({gpus, job});
  if (it == cache.end()) {
    bench::BenchInputs in = bench::DeepSeekV3On(gpus);
    if (job == Job::kBefore) bench::DefaultJobBefore(in.job);
    if (job == Job::kWidened) bench::WidenJob(in.job);
    Setup s{std::move(in.cluster), std::move(in.model), std::move(in.job), nullptr, {}};
    s.cost = Create(s);
    it = cache.emplace(std::pair{gpus, job}, std::move(s)).first;
  }
  Setup& s = it->second;
  if (legal && s.legal.empty()) s.legal = EnumerateLayouts(s.cost->legality()).legal;
  return s;
}

// One thread scoring every legal layout once per iteration, in search order,
// as a search does: a fresh cost model each pass (created untimed), so its
// per-thread caches start cold every pass. CPU time: items_per_second is
// layouts scored per CPU second of the scoring thread.
void ScoreOnePass(benchmark::State& state, bool widened) {
  Setup& s = DeepSeekOn(static_cast<int>(state.range(0)), widened ? Job::kWidened : Job::kBefore);
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<CostModel> cost = Create(s);
    state.ResumeTiming();
    for (const Layout& l : s.legal) benchmark::DoNotOptimize(cost->Score(l, false).objective);
    state.PauseTiming();
    cost.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(s.legal.size()));
  state.counters["legal"] = static_cast<double>(s.legal.size());
  state.SetLabel("layouts scored per CPU second, one thread, caches cold each pass");
}
void BM_ScoreDeepSeekV3(benchmark::State& state) { ScoreOnePass(state, false); }
BENCHMARK(BM_ScoreDeepSeekV3)->Arg(1024)->Arg(16384)->Arg(131072)->Unit(benchmark::kMillisecond);
// The same with bench/plan_widened_bench.cc's job (every recipe option a candidate).
void BM_ScoreWidenedDeepSeekV3(benchmark::State& state) { ScoreOnePass(state, true); }
BENCHMARK(BM_ScoreWidenedDeepSeekV3)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond);

// Scoring a family at a time (CostModel::ScoreFamily, the search's way):
// one thread walks every work item's families, in the search's order (runs
// of one pp, tp and cp: RunsOf), and scores every member with
// no bound (nothing pruned: each fitting layout gets its step time), a
// fresh cost model each pass (created untimed). Enumeration is included in
// the time, so items_per_second (legal layouts per CPU second) is a floor
// on the scoring rate, beside BM_ScoreDeepSeekV3's layout-at-a-time rate.
class CountingSink : public ScoreSink {
 public:
  double PruneAbove() const override { return CostModel::kNoPruning; }
  void Scored(const Layout&, const LayoutScore& score) override {
    ++scored;
    fitting += score.fits;
    benchmark::DoNotOptimize(score.objective);
  }
  void ScoredAlike(const LayoutScore&, uint64_t count) override { scored += count; }
  uint64_t scored = 0, fitting = 0;
};
void ScoreFamilies(benchmark::State& state, bool widened) {
  Setup& s = DeepSeekOn(static_cast<int>(state.range(0)), widened ? Job::kWidened : Job::kBefore);
  uint64_t scored = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<CostModel> cost = Create(s);
    const LegalityContext ctx = cost->legality();
    LayoutEnumerator walker(ctx, nullptr);
    CountingSink sink;
    Enumeration counts;
    state.ResumeTiming();
    for (const EnumerationItem& item : RunsOf(walker.Items()).items) {
      walker.RunFamilies(item, &counts, [&](const LayoutFamily& f) { cost->ScoreFamily(f, false, sink); });
    }
    state.PauseTiming();
    if (sink.scored != s.legal.size()) {
      state.SkipWithError("ScoreFamily did not score every legal layout once");
      break;
    }
    scored += sink.scored;
    cost.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(scored));
  state.counters["legal"] = static_cast<double>(s.legal.size());
  state.SetLabel("layouts scored per CPU second, one thread, families, enumeration included");
}
void BM_ScoreFamiliesDeepSeekV3(benchmark::State& state) { ScoreFamilies(state, false); }
BENCHMARK(BM_ScoreFamiliesDeepSeekV3)->Arg(1024)->Arg(16384)->Arg(131072)->Unit(benchmark::kMillisecond);
void BM_ScoreFamiliesWidenedDeepSeekV3(benchmark::State& state) { ScoreFamilies(state, true); }
BENCHMARK(BM_ScoreFamiliesWidenedDeepSeekV3)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond);

// The whole search as `foldplan plan` runs it: enumeration plus scoring on
// two threads (without plan's default memory margin, which only refuses
// more layouts before their step time), the default job; and the same with
// the default job before it searched ring CP, EP overlap, FSDP and DeepEP.
void PlanSearch(benchmark::State& state, Job job) {
  Setup& s = DeepSeekOn(static_cast<int>(state.range(0)), job, false);
  const CostScorer scorer(*s.cost, Objective::kThroughput);
  SearchResult r;
  for (auto _ : state) {
    r = SearchLayouts(s.cost->legality(), scorer, {.top = 10, .threads = 2});
    benchmark::DoNotOptimize(r.best.data());
  }
  state.counters["candidates"] = static_cast<double>(r.enumeration.candidates);
  state.counters["legal"] = static_cast<double>(r.scored);
  state.counters["scored/s"] = benchmark::Counter(static_cast<double>(r.scored),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}
// Wall time, and the CPU time of both threads (the process's): on a busy
// machine the wall time grows with the load, the CPU time much less; on
// an idle 2-core one the wall time is about half of it.
void BM_PlanDeepSeekV3(benchmark::State& state) { PlanSearch(state, Job::kDefault); }
void BM_PlanDeepSeekV3Before(benchmark::State& state) { PlanSearch(state, Job::kBefore); }
BENCHMARK(BM_PlanDeepSeekV3)->Arg(1024)->Arg(16384)->Arg(131072)->Unit(benchmark::kMillisecond)
    ->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_PlanDeepSeekV3Before)->Arg(1024)->Arg(16384)->Arg(131072)->Unit(benchmark::kMillisecond)
    ->UseRealTime()->MeasureProcessCPUTime();

}  // namespace

BENCHMARK_MAIN();
