// Fit speed: FitEnvelope on one series of a typical size (32 sizes, as
// nccl-tests' 8 B .. 16 GiB at factor 2) and at kMaxSeriesPoints (16384
// points, the most calibrate fits in one series; doc/formats.md
// "Calibration" quotes these figures), on a two-protocol curve with 2%
// noise, side by side.
//   build/calibrate_bench
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "core/mix64.h"
#include "costmodel/calibrate.h"
#include "costmodel/envelope_fit.h"

namespace {

using namespace foldplan;

// `points` points over `sizes` sizes growing by 2^(32 / sizes) from 8 B
// (so always 8 B .. 32 GiB): 5 us + b / 20 GB/s below the switch, 30 us +
// b / 150 GB/s above, each point +-2%.
std::vector<TimedBytes> Series(size_t points, size_t sizes) {
  const std::vector<AlphaBetaSegment> truth = {{5, 20}, {30, 150}};
  std::vector<TimedBytes> out;
  uint64_t state = 7;
  for (size_t i = 0; i < points; ++i) {
    const double bytes = 8.0 * std::pow(2.0, 32.0 * static_cast<double>(i % sizes) / static_cast<double>(sizes));
    const double u = static_cast<double>(Mix64(state) >> 11) / 9007199254740992.0;
    state += kSplitMix64Increment;
    out.push_back({bytes, EnvelopeSeconds(truth, bytes) * (1 + 0.04 * (u - 0.5))});
  }
  return out;
}

void BM_FitEnvelope(benchmark::State& state) {
  const std::vector<TimedBytes> points =
      Series(static_cast<size_t>(state.range(0)), static_cast<size_t>(state.range(1)));
  for (auto _ : state) benchmark::DoNotOptimize(FitEnvelope(points));
  state.counters["points"] = static_cast<double>(points.size());
}
// (points, distinct sizes): a sweep; the limit with a sweep's sizes; the
// limit with every point its own size (splits on the 48-position grid).
BENCHMARK(BM_FitEnvelope)
    ->Args({32, 32})
    ->Args({static_cast<int64_t>(kMaxSeriesPoints), 32})
    ->Args({static_cast<int64_t>(kMaxSeriesPoints), static_cast<int64_t>(kMaxSeriesPoints)})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
