// Simulator speed (doc/performance.md quotes these figures): one
// DeepSeek-V3 training step, side by side
//   - on 4,096 GPUs (pp 16, ep 64, dp 256) with 16,384 sequences per step,
//     64 micro-batches, on the fast path (one simulated rank per stage);
//     target: under 1 s;
//   - on 1,024 GPUs (pp 16, ep 64, dp 64) with 4,096 sequences, 64
//     micro-batches, every rank simulated with zipf:1 routing imbalance;
//     target: under 30 s;
// each with its tasks, events and events per second.
//   build/sim_bench
#include <benchmark/benchmark.h>

#include <iostream>
#include <string>

#include "bench/deepseek_inputs.h"
#include "costmodel/evaluate.h"
#include "sim/simulate.h"

namespace {

using namespace foldplan;

void Run(benchmark::State& state, int gpus, long long global_batch, const char* imbalance) {
  bench::BenchInputs in = bench::DeepSeekV3On(gpus);
  in.job.global_batch = global_batch;
  auto cost = CostModel::Create(in.cluster, in.model, in.job);
  auto layout = ParseLayout("tp=1,cp=1,pp=16,ep=64,etp=1", gpus, &in.job);
  auto spec = ParseLoadSpec(imbalance);
  if (!cost.ok() || !layout.ok() || !spec.ok()) {
    std::cerr << "cannot set up the benchmark\n";
    std::exit(1);
  }
  SimOptions options;
  options.imbalance = spec.value();
  options.seed = 1;
  uint64_t events = 0, tasks = 0;
  double step = 0;
  for (auto _ : state) {
    auto r = Simulate(*cost.value(), layout.value(), options);
    if (!r.ok()) {
      state.SkipWithError(r.status().message().c_str());
      return;
    }
    events = r->events;
    tasks = r->tasks;
    step = r->step_time_s;
  }
  state.counters["microbatches"] = static_cast<double>(MicroBatchesPerStep(in.job, layout.value()));
  state.counters["tasks"] = static_cast<double>(tasks);
  state.counters["events"] = static_cast<double>(events);
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel("simulated step " + std::to_string(step) + " s");
}

void BM_SimulateDeepSeekV3FastPath4096(benchmark::State& state) { Run(state, 4096, 16384, ""); }
BENCHMARK(BM_SimulateDeepSeekV3FastPath4096)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SimulateDeepSeekV3Whole1024Zipf(benchmark::State& state) { Run(state, 1024, 4096, "zipf:1"); }
BENCHMARK(BM_SimulateDeepSeekV3Whole1024Zipf)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
