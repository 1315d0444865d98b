// Compute times of the search's compute keys (costmodel/compute_time.h):
// DeepSeek-V3 on 16,384 H100 GPUs with the widened job and the recipe
// options (bench/deepseek_inputs.h), one legal layout per distinct
// ComputeTimesCache key, in enumeration order (the order a search first
// meets them).
//  - BM_ComputeLayerTimes: ComputeLayerTimes of each key's layout.
//  - BM_ComputeLayerTimesRateMemo: the same through a ComputeRateMemo.
//  - BM_ComputeTimesCacheMiss: ComputeTimesCache::Get of each, a fresh
//    cache of the default size per pass (every call a miss, as each key's
//    first touch in a search is; cleared when full, as there).
//  - BM_ComputeTimesCacheHit: Get of the first kHitKeys keys' layouts under
//    each of the job's recompute sets, twice, on a cache already holding
//    them (every call a hit: the lookup, the copy and the recompute sums).
// Counters: CPU ns per call (the machines this runs on are shared).
#include <benchmark/benchmark.h>

#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <unordered_set>
#include <vector>

#include "costmodel/compute_profile.h"
#include "costmodel/compute_time.h"
#include "costmodel/compute_time_memo.h"
#include "costmodel/evaluate.h"
#include "deepseek_inputs.h"
#include "planner/enumerate.h"

namespace {

using namespace foldplan;

struct Setup {
  bench::BenchInputs in;
  std::unique_ptr<CostModel> cost;
  std::vector<Layout> keys;  // one layout per distinct compute key
};

const Setup& DeepSeekKeys() {
  static Setup* s = [] {
    auto* out = new Setup{bench::DeepSeekV3On(16384), nullptr, {}};
    bench::WidenJob(out->in.job);
    bench::AddRecipeOptions(out->in.job);
    auto cost = CostModel::Create(out->in.cluster, out->in.model, out->in.job);
    if (!cost.ok()) {
      std::cerr << cost.status().message() << "\n";
      std::exit(1);
    }
    out->cost = std::move(cost).value();
    std::unordered_set<ComputeTimesCache::Key, ComputeTimesCache::KeyHash> seen;
    EnumerateOptions options;
    options.collect_layouts = false;
    options.visit = [&](const Layout& l) {
      if (seen.insert(ComputeTimesCache::KeyOf(l)).second) out->keys.push_back(l);
    };
    EnumerateLayouts(out->cost->legality(), options);
    if (out->keys.empty()) {
      std::cerr << "no legal layout\n";
      std::exit(1);
    }
    return out;
  }();
  return *s;
}

double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

void Report(benchmark::State& state, double cpu_s, double calls, size_t keys) {
  state.counters["keys"] = double(keys);
  state.counters["ns_per_call"] = cpu_s / calls * 1e9;
}

void BM_ComputeLayerTimes(benchmark::State& state) {
  const Setup& s = DeepSeekKeys();
  const CostContext& ctx = s.cost->context();
  double cpu_s = 0;
  for (auto _ : state) {
    const double t0 = CpuSeconds();
    for (const Layout& l : s.keys) {
      const ComputeTimes t = ComputeLayerTimes(l, ctx);
      benchmark::DoNotOptimize(t.moe_layer.routed_experts.fwd_s);
    }
    cpu_s += CpuSeconds() - t0;
  }
  Report(state, cpu_s, double(state.iterations()) * double(s.keys.size()), s.keys.size());
}
BENCHMARK(BM_ComputeLayerTimes)->Unit(benchmark::kMillisecond);

// The same through one ComputeRateMemo with room for every shape (as a
// ComputeTimesCache's misses look rates up); `shapes`: the lookups it holds.
void BM_ComputeLayerTimesRateMemo(benchmark::State& state) {
  const Setup& s = DeepSeekKeys();
  const CostContext& ctx = s.cost->context();
  ComputeRateMemo memo(1 << 20);
  double cpu_s = 0;
  for (auto _ : state) {
    memo.Clear();
    const double t0 = CpuSeconds();
    for (const Layout& l : s.keys) {
      const ComputeTimes t = ComputeLayerTimes(l, ctx, nullptr, nullptr, &memo);
      benchmark::DoNotOptimize(t.moe_layer.routed_experts.fwd_s);
    }
    cpu_s += CpuSeconds() - t0;
  }
  Report(state, cpu_s, double(state.iterations()) * double(s.keys.size()), s.keys.size());
  state.counters["shapes"] = double(memo.size());
}
BENCHMARK(BM_ComputeLayerTimesRateMemo)->Unit(benchmark::kMillisecond);

void BM_ComputeTimesCacheMiss(benchmark::State& state) {
  const Setup& s = DeepSeekKeys();
  const CostContext& ctx = s.cost->context();
  double cpu_s = 0;
  for (auto _ : state) {
    const double t0 = CpuSeconds();
    {
      ComputeTimesCache cache;
      for (const Layout& l : s.keys) benchmark::DoNotOptimize(cache.Get(l, ctx).moe_layer.recompute_s);
    }
    cpu_s += CpuSeconds() - t0;
  }
  Report(state, cpu_s, double(state.iterations()) * double(s.keys.size()), s.keys.size());
}
BENCHMARK(BM_ComputeTimesCacheMiss)->Unit(benchmark::kMillisecond);

constexpr size_t kHitKeys = 4096;  // within the default cache size

void BM_ComputeTimesCacheHit(benchmark::State& state) {
  const Setup& s = DeepSeekKeys();
  const CostContext& ctx = s.cost->context();
  const std::vector<Layout> keys(s.keys.begin(), s.keys.begin() + std::ptrdiff_t(std::min(kHitKeys, s.keys.size())));
  ComputeTimesCache cache(keys.size());
  for (const Layout& l : keys) cache.Get(l, ctx);
  std::vector<Layout> stream;
  for (const Layout& l : keys) {
    for (int pass = 0; pass < 2; ++pass) {
      for (const Recompute& rc : s.in.job.recompute) {
        stream.push_back(l);
        stream.back().recompute = rc;
      }
    }
  }
  double cpu_s = 0;
  for (auto _ : state) {
    const double t0 = CpuSeconds();
    for (const Layout& l : stream) benchmark::DoNotOptimize(cache.Get(l, ctx).moe_layer.recompute_s);
    cpu_s += CpuSeconds() - t0;
  }
  if (cache.size() != keys.size()) {
    std::cerr << "the cache missed\n";
    std::exit(1);
  }
  Report(state, cpu_s, double(state.iterations()) * double(stream.size()), keys.size());
}
BENCHMARK(BM_ComputeTimesCacheHit)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
