// The widened search: DeepSeek-V3 on 1,024 H100 with every recipe option a
// candidate (4 recompute choices, 2 dispatchers, EP overlap on and off, bf16
// and fp8, FSDP on and off, TP overlap on and off: 128 combinations per set
// of degrees against the default job's 3), enumerate + score on 2 threads as
// `foldplan plan` runs it. Prints candidates, legal layouts, the time and
// the process's peak resident memory (its own binary, so the peak is this
// search's: the legal layouts are held in memory before scoring).
#include <sys/resource.h>

#include <benchmark/benchmark.h>

#include <iostream>

#include "costmodel/evaluate.h"
#include "deepseek_inputs.h"
#include "planner/search.h"

namespace {

using namespace foldplan;

void BM_PlanWidenedDeepSeekV3(benchmark::State& state) {
  bench::BenchInputs in = bench::DeepSeekV3On(static_cast<int>(state.range(0)));
  JobSpec& job = in.job;
  job.recompute = {Recompute::None(), Recompute::Selective(), Recompute::Full(),
                   Recompute::Modules((1u << int(RecomputeModule::kLayernorm)) |
                                      (1u << int(RecomputeModule::kMoeAct)))};
  job.dispatchers = {Dispatcher::kAllToAll, Dispatcher::kDeepEP};
  job.a2a_overlap = {false, true};
  job.precisions = {Precision::kBF16, Precision::kFP8Tensorwise};
  job.fsdp = {false, true};
  job.tp_overlap = {false, true};
  auto cost = CostModel::Create(in.cluster, in.model, job);
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
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["candidates"] = static_cast<double>(r.enumeration.candidates);
  state.counters["legal"] = static_cast<double>(r.scored);
  state.counters["peak_rss_MiB"] = static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is KiB on Linux
}
BENCHMARK(BM_PlanWidenedDeepSeekV3)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
