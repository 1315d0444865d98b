// Enumeration speed: the full legal set of deepseek-v3 on 1,024 to 131,072
// H100 GPUs with the default job, counting only and collecting layouts.
// Prints candidates and legal layouts per second as counters.
//   build/enumerate_bench [--benchmark_filter=16384]
#include <benchmark/benchmark.h>

#include <map>

#include "deepseek_inputs.h"
#include "planner/enumerate.h"

namespace {

using namespace foldplan;

using bench::BenchInputs;

const BenchInputs& DeepSeekOn(int gpus) {
  static std::map<int, BenchInputs> cache;
  auto it = cache.find(gpus);
  if (it != cache.end()) return it->second;
  BenchInputs in = bench::DeepSeekV3On(gpus);
  bench::DefaultJobBefore(in.job);  // doc/performance.md's figures' job; the default's legal set runs to millions
  return cache[gpus] = std::move(in);
}

void Enumerate(benchmark::State& state, bool collect) {
  const BenchInputs& in = DeepSeekOn(static_cast<int>(state.range(0)));
  const LegalityContext ctx{&in.cluster, &in.model, &in.job};
  Enumeration e;
  for (auto _ : state) {
    e = EnumerateLayouts(ctx, {.collect_layouts = collect});
    benchmark::DoNotOptimize(e.legal.data());
  }
  state.counters["candidates"] = static_cast<double>(e.candidates);
  state.counters["legal"] = static_cast<double>(e.legal_count);
  state.counters["candidates/s"] = benchmark::Counter(
      static_cast<double>(e.candidates), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["legal/s"] = benchmark::Counter(static_cast<double>(e.legal_count),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_EnumerateDeepSeekV3(benchmark::State& state) { Enumerate(state, true); }
void BM_CountDeepSeekV3(benchmark::State& state) { Enumerate(state, false); }

BENCHMARK(BM_EnumerateDeepSeekV3)->Arg(1024)->Arg(16384)->Arg(131072)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CountDeepSeekV3)->Arg(1024)->Arg(16384)->Arg(131072)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
