// Search speed: candidates scored per second by the cost model, and the
// full `plan` search (enumerate + score on 2 threads) for deepseek-v3 on
// 1,024, 16,384 and 131,072 H100 GPUs with the default job.
#include <benchmark/benchmark.h>

#include <iostream>
#include <map>

#include "costmodel/evaluate.h"
#include "deepseek_inputs.h"
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

Setup& DeepSeekOn(int gpus) {
  static std::map<int, Setup> cache;
  if (auto it = cache.find(gpus); it != cache.end()) return it->second;
  bench::BenchInputs in = bench::DeepSeekV3On(gpus);
  Setup s{std::move(in.cluster), std::move(in.model), std::move(in.job), nullptr, {}};
  auto cost = CostModel::Create(s.cluster, s.model, s.job);
  if (!cost.ok()) {
    std::cerr << cost.status().message() << "\n";
    std::exit(1);
  }
  s.cost = std::move(cost).value();
  s.legal = EnumerateLayouts(s.cost->legality()).legal;
  return cache[gpus] = std::move(s);
}

// One thread scoring the legal layouts one after another.
void BM_ScoreDeepSeekV3(benchmark::State& state) {
  Setup& s = DeepSeekOn(static_cast<int>(state.range(0)));
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(s.cost->Score(s.legal[i], false).objective);
    if (++i == s.legal.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("layouts scored per second, one thread");
}
BENCHMARK(BM_ScoreDeepSeekV3)->Arg(1024)->Arg(16384)->Arg(131072);

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
