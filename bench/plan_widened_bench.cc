// The widened search: DeepSeek-V3 on 1,024 and 16,384 H100 with
// micro-batch 1/2/4/8, VPP 1/2/4/8, every recompute mode, both CP styles,
// six orders and a global batch of 8192; the "recipes" variant adds the
// production-recipe options as candidates (recompute modules, alltoall and
// DeepEP, EP and TP overlap, bf16 and two FP8 recipes, FSDP, the 1F1B and
// ZB-H1 schedules). Enumerate + score on 2 threads as `foldplan plan` runs
// it. Prints candidates, legal (scored) layouts, fitting layouts, those
// pruned by the step-time bound (not ranked), the time
// and the process's peak resident memory. Peak RSS is per process, so run
// one size per process:
//   build/plan_widened_bench --benchmark_filter='Widened/16384'
//   build/plan_widened_bench --benchmark_filter='WidenedRecipes/1024'
#include <sys/resource.h>

#include <benchmark/benchmark.h>

#include <iostream>

#include "costmodel/evaluate.h"
#include "deepseek_inputs.h"
#include "planner/search.h"

namespace {

using namespace foldplan;

double PeakRssMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is KiB on Linux
}

void Search(benchmark::State& state, bool recipes) {
  const double rss_before = PeakRssMiB();
  bench::BenchInputs in = bench::DeepSeekV3On(static_cast<int>(state.range(0)));
  bench::WidenJob(in.job);
  if (recipes) bench::AddRecipeOptions(in.job);
  auto cost = CostModel::Create(in.cluster, in.model, in.job);
  if (!cost.ok()) {
    std::cerr << cost.status().message() << "\n";
    std::exit(1);
  }
  const CostScorer scorer(*cost.value(), Objective::kThroughput);
  SearchResult r;
  for (auto _ : state) {
    r = SearchLayouts(cost.value()->legality(), scorer, {.top = 10, .threads = 2});
    benchmark::DoNotOptimize(r.best.data());
  }
  state.counters["candidates"] = static_cast<double>(r.enumeration.candidates);
  state.counters["legal"] = static_cast<double>(r.scored);
  state.counters["scored"] = static_cast<double>(r.scored);
  state.counters["fitting"] = static_cast<double>(r.enumeration.legal_count);
  state.counters["pruned"] = static_cast<double>(r.pruned);
  state.counters["peak_rss_MiB"] = PeakRssMiB();
  state.counters["rss_growth_MiB"] = PeakRssMiB() - rss_before;
}

void BM_PlanWidened(benchmark::State& state) { Search(state, false); }
void BM_PlanWidenedRecipes(benchmark::State& state) { Search(state, true); }
BENCHMARK(BM_PlanWidened)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_PlanWidenedRecipes)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
