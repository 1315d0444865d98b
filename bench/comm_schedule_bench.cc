// Per-layout communication plan and pipeline schedule, the two pieces of a
// layout's full score after the compute work: DeepSeek-V3 on 16,384 H100
// GPUs with the widened job and the recipe options (bench/deepseek_inputs.h),
// a sample of the fitting legal layouts (runs of a few consecutive ones in
// search order), each with its pipeline, group placement and
// CostModel::Work computed once, grouped by placement (the search scores a
// family arrangement by arrangement, one placement's layouts together).
//   BM_BuildCommPlan:    BuildCommPlan with a CollectiveTimeMemo cleared when
//                        the placement changes (as CostModel keeps it)
//   BM_BuildCommPlanCold: the same without a memo (every op timed)
//   BM_SchedulePipeline: SchedulePipeline + DataParallelExposure
// The samples are taken in batches of kBatch, each batch kPasses times over:
// in the search a layout's work is in cache when it is scheduled (it was
// just built), and a placement's memo serves many layouts, so the first
// pass's cache and memo misses are diluted. Counter
// ns_per_call: CPU nanoseconds per call (shared machines: the thread's CPU
// clock, not wall time).
#include <benchmark/benchmark.h>

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <vector>

#include "costmodel/collective_time_memo.h"
#include "costmodel/comm_plan.h"
#include "costmodel/evaluate.h"
#include "costmodel/schedule.h"
#include "deepseek_inputs.h"
#include "planner/enumerate.h"
#include "planner/group_placement.h"
#include "planner/pipeline.h"

namespace {

using namespace foldplan;

// Of every kStride legal layouts in search order, the first kRun.
constexpr uint64_t kStride = 40000;
constexpr uint64_t kRun = 4;
constexpr size_t kBatch = 4;  // x ~25 ops: within the memo's 128 entries
constexpr int kPasses = 4;

struct Sample {
  Layout layout;
  PipelineDescription pipeline;  // the work points to it: samples are not moved
  LayoutPlacement placement;
  StepWork work;
  int placement_id = 0;  // the samples are grouped by placement: equal ids, equal placements
};

// Calls `f` on each sample, batch by batch, each batch kPasses times;
// returns the calls made.
template <class F>
size_t ForBatches(const std::vector<std::unique_ptr<Sample>>& samples, F&& f) {
  size_t calls = 0;
  for (size_t begin = 0; begin < samples.size(); begin += kBatch) {
    const size_t end = std::min(samples.size(), begin + kBatch);
    for (int pass = 0; pass < kPasses; ++pass) {
      for (size_t i = begin; i < end; ++i) f(*samples[i]);
    }
    calls += kPasses * (end - begin);
  }
  return calls;
}

struct Setup {
  bench::BenchInputs in;
  std::unique_ptr<CostModel> cost;
  std::vector<std::unique_ptr<Sample>> samples;
};

const Setup& Samples() {
  static Setup* setup = [] {
    auto* s = new Setup{bench::DeepSeekV3On(16384), nullptr, {}};
    bench::WidenJob(s->in.job);
    bench::AddRecipeOptions(s->in.job);
    auto cost = CostModel::Create(s->in.cluster, s->in.model, s->in.job);
    if (!cost.ok()) {
      std::cerr << cost.status().message() << "\n";
      std::exit(1);
    }
    s->cost = std::move(cost).value();
    const CostModel& model = *s->cost;
    uint64_t seen = 0;
    std::vector<std::vector<std::unique_ptr<Sample>>> groups;  // by placement, in order of first sight
    EnumerateOptions options;
    options.collect_layouts = false;
    options.visit = [&](const Layout& l) {
      if (seen++ % kStride >= kRun) return;
      if (!model.Score(l, false).fits) return;
      auto placement = PlaceGroups(l, *model.context().topology);
      if (!placement.ok()) return;
      auto sample = std::make_unique<Sample>();
      sample->layout = l;
      sample->pipeline = DescribePipeline(l, s->in.model, &model.pipeline_weights());
      sample->placement = std::move(placement).value();
      sample->work = model.Work(sample->layout, sample->pipeline);
      groups.emplace_back().push_back(std::move(sample));
      for (size_t g = 0; g + 1 < groups.size(); ++g) {
        if (groups[g].front()->placement == groups.back().front()->placement) {
          groups[g].push_back(std::move(groups.back().front()));
          groups.pop_back();
          break;
        }
      }
    };
    EnumerateLayouts(model.legality(), options);
    for (size_t g = 0; g < groups.size(); ++g) {
      for (auto& sample : groups[g]) {
        sample->placement_id = static_cast<int>(g);
        s->samples.push_back(std::move(sample));
      }
    }
    if (s->samples.empty()) {
      std::cerr << "no fitting layout sampled\n";
      std::exit(1);
    }
    return s;
  }();
  return *setup;
}

double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

void Report(benchmark::State& state, double cpu_s, size_t calls) {
  state.counters["layouts"] = static_cast<double>(Samples().samples.size());
  state.counters["ns_per_call"] = 1e9 * cpu_s / static_cast<double>(calls);
}

void CommPlan(benchmark::State& state, bool memoised) {
  const Setup& s = Samples();
  const CostContext& ctx = s.cost->context();
  CollectiveTimeMemo memo;
  double cpu_s = 0;
  size_t calls = 0;
  for (auto _ : state) {
    const double start = CpuSeconds();
    int last = -1;
    calls += ForBatches(s.samples, [&](const Sample& sample) {
      if (sample.placement_id != last) memo.Clear();  // as CostModel keeps it: one placement's timings
      last = sample.placement_id;
      std::vector<CommOp> ops =
          BuildCommPlan(sample.layout, ctx, sample.placement, sample.pipeline, memoised ? &memo : nullptr);
      benchmark::DoNotOptimize(ops.data());
    });
    cpu_s += CpuSeconds() - start;
  }
  Report(state, cpu_s, calls);
}

void BM_BuildCommPlan(benchmark::State& state) { CommPlan(state, true); }
void BM_BuildCommPlanCold(benchmark::State& state) { CommPlan(state, false); }

void BM_SchedulePipeline(benchmark::State& state) {
  const Setup& s = Samples();
  double cpu_s = 0;
  size_t calls = 0;
  for (auto _ : state) {
    const double start = CpuSeconds();
    calls += ForBatches(s.samples, [&](const Sample& sample) {
      const PipelineTimes times = SchedulePipeline(sample.work);
      const DataParallelTimes dp = DataParallelExposure(sample.work, times);
      benchmark::DoNotOptimize(times.pipeline_s + dp.exposed_s);
    });
    cpu_s += CpuSeconds() - start;
  }
  Report(state, cpu_s, calls);
}

BENCHMARK(BM_BuildCommPlan)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BuildCommPlanCold)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SchedulePipeline)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
