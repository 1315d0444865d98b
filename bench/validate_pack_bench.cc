// Ulysses pack / unpack on the host (validate/kernels.h HostCopyRuns, what
// the MPI backend runs) against a plain memcpy of the same bytes, side by
// side in one run: the CPU counterpart of the GPU target (pack and
// unpack at >= 80% of the device copy bandwidth). Bytes/s counts the tensor
// once (bytes read = bytes written), for the copy and the packs alike.
//   build/validate_pack_bench
// Shapes: [S/C = 2048, H, d] bf16 (S = 4096, CP = 2), i.e. runs of
// H/2 x d x 2 B: Mixtral (H 32, d 128: 4 KiB runs) and a small-head case
// (H 4, d 64: 256 B runs). Unpack is the strided one (ulysses_copies.h).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "ulysses_copies.h"
#include "validate/kernels.h"

namespace {

using foldplan::validate::HostCopyRuns;
using foldplan::validate::RunCopy;

using Shape = foldplan::bench::UlyssesShape;

// {heads, head_dim} of a 4096-token sequence over CP = 2.
Shape ShapeOf(const benchmark::State& state) {
  return {2, state.range(0), 4096, state.range(1)};
}

void BM_Memcpy(benchmark::State& state) {
  const Shape s = ShapeOf(state);
  std::vector<char> in(s.Bytes(), 1), out(s.Bytes());
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), in.size());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * s.Bytes());
}

void BM_UlyssesPack(benchmark::State& state) {
  const Shape s = ShapeOf(state);
  std::vector<char> in(s.Bytes(), 1), out(s.Bytes());
  const RunCopy copy = foldplan::bench::UlyssesPack(s);
  for (auto _ : state) {
    HostCopyRuns(out.data(), in.data(), copy);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * s.Bytes());
}

void BM_UlyssesUnpack(benchmark::State& state) {
  const Shape s = ShapeOf(state);
  std::vector<char> in(s.Bytes(), 1), out(s.Bytes());
  const RunCopy copy = foldplan::bench::UlyssesUnpack(s);
  for (auto _ : state) {
    HostCopyRuns(out.data(), in.data(), copy);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * s.Bytes());
}

// {heads, head_dim}
#define SHAPES ->Args({32, 128})->Args({4, 64})->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_Memcpy) SHAPES;
BENCHMARK(BM_UlyssesPack) SHAPES;
BENCHMARK(BM_UlyssesUnpack) SHAPES;

}  // namespace

BENCHMARK_MAIN();
