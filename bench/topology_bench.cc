// Topology speed: Build() of DGX H100 clusters up to 131,072 GPUs, and
// Span() of a 16,384-GPU set (sorted and reversed member order).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>

#include "topology/topology.h"

namespace {

using namespace foldplan;

ClusterSpec DgxH100(int nodes) {
  ClusterSpec c;
  c.name = "dgx-h100-bench";
  c.gpu.name = "H100 SXM5";
  c.nodes = nodes;
  return c;  // defaults: 8 GPUs per node, 8-GPU NVLink domains, 8 x 400 Gb/s NICs
}

void BM_Build(benchmark::State& state) {
  const ClusterSpec c = DgxH100(static_cast<int>(state.range(0)) / 8);
  for (auto _ : state) {
    auto topo = Topology::Build(c);
    benchmark::DoNotOptimize(topo.ok());
  }
  state.counters["gpus"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_Build)->Arg(1024)->Arg(16384)->Arg(131072)->Unit(benchmark::kMillisecond);

void BM_Span(benchmark::State& state) {
  const Topology topo = std::move(Topology::Build(DgxH100(2048))).value();
  std::vector<int> gpus(16384);
  std::iota(gpus.begin(), gpus.end(), 0);
  if (state.range(0) == 1) std::reverse(gpus.begin(), gpus.end());
  for (auto _ : state) benchmark::DoNotOptimize(topo.Span(gpus).domains);
  state.SetLabel(state.range(0) == 1 ? "16384 GPUs, reversed" : "16384 GPUs, sorted");
}
BENCHMARK(BM_Span)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
