// Search speed: candidates scored per CPU second by the cost model (the
// default job and the widened one), a layout at a time and a family at a
// time, and the full `plan` search (enumerate +
// score on 2 threads) for deepseek-v3 on 1,024, 16,384 and 131,072 H100
// GPUs with the default job.
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

Setup& DeepSeekOn(int gpus, bool widened = false) {
  static std::map<std::pair<int, bool>, Setup> cache;
  if (auto it = cache.find({gpus, widened}); it != cache.end()) return it->second;
  bench::BenchInputs in = bench::DeepSeekV3On(gpus);
  if (widened) bench::WidenJob(in.job);
  Setup s{std::move(in.cluster), std::move(in.model), std::move(in.job), nullptr, {}};
  s.cost = Create(s);
  s.legal = EnumerateLayouts(s.cost->legality()).legal;
  return cache[{gpus, widened}] = std::move(s);
}

// One thread scoring every legal layout once per iteration, in search order,
// as a search does: a fresh cost model each pass (created untimed), so its
// per-thread caches start cold every pass. CPU time: items_per_second is
// layouts scored per CPU second of the scoring thread.
void ScoreOnePass(benchmark::State& state, bool widened) {
  Setup& s = DeepSeekOn(static_cast<int>(state.range(0)), widened);
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
  Setup& s = DeepSeekOn(static_cast<int>(state.range(0)), widened);
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

// The whole search as `foldplan plan` runs it: enumeration plus scoring on two threads.
void BM_PlanDeepSeekV3(benchmark::State& state) {
  Setup& s = DeepSeekOn(static_cast<int>(state.range(0)));
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
BENCHMARK(BM_PlanDeepSeekV3)->Arg(1024)->Arg(16384)->Arg(131072)->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
