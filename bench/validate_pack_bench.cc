// Ulysses pack / unpack on the host (validate/kernels.h HostCopyRuns, what
// the MPI backend runs) against a plain memcpy of the same bytes, side by
// side in one run: the CPU counterpart of the GPU target (pack and
// unpack at >= 80% of the device copy bandwidth). Bytes/s counts the tensor
// once (bytes read = bytes written), for the copy and the packs alike.
//   build/validate_pack_bench
// Shapes: [S/C = 2048, H, d] bf16 (S = 4096, CP = 2), i.e. runs of
// H/2 x d x 2 B: Mixtral (H 32, d 128: 4 KiB runs) and a small-head case
// (H 4, d 64: 256 B runs). Unpack is the strided one, after heads -> seq.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "validate/kernels.h"
#include "validate/ulysses_layout.h"

namespace {

using foldplan::validate::HostCopyRuns;
using foldplan::validate::RunCopy;

using foldplan::validate::UlyssesDirection;
using foldplan::validate::UlyssesMove;
using Shape = foldplan::validate::UlyssesShape;

// {heads, head_dim} of a 4096-token sequence over CP = 2.
Shape ShapeOf(const benchmark::State& state) {
  return {1, 4096, state.range(0), state.range(1), 2, 2};
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
  // The seq -> heads pack.
  const RunCopy copy = UlyssesMove(s, UlyssesDirection::kSeqToHeads).pack;
  for (auto _ : state) {
    HostCopyRuns(out.data(), in.data(), copy);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * s.Bytes());
}

void BM_UlyssesUnpack(benchmark::State& state) {
  const Shape s = ShapeOf(state);
  std::vector<char> in(s.Bytes(), 1), out(s.Bytes());
  // The strided unpack after heads -> seq (seq -> heads unpacks into a
  // plain copy when B = 1).
  const RunCopy copy = UlyssesMove(s, UlyssesDirection::kHeadsToSeq).unpack;
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
