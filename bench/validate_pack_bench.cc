// Ulysses pack / unpack on the host (validate/kernels.h HostCopyRuns, what
// the MPI backend runs) against a plain memcpy of the same bytes, side by
// side in one run: the CPU counterpart of the GPU target (pack and
// unpack at >= 80% of the device copy bandwidth). Bytes/s counts the tensor
// once (bytes read = bytes written), for the copy and the packs alike.
//   build/validate_pack_bench
// Shapes: [B=1, S=4096, H, d] bf16 over CP = 2, i.e. runs of H/2 x d x 2 B:
// Mixtral (H 32, d 128: 4 KiB runs) and a small-head case (H 4, d 64: 256 B).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "validate/kernels.h"

namespace {

using foldplan::validate::HostCopyRuns;
using foldplan::validate::RunCopy;

struct Shape {
  int64_t batch, seq, heads, head_dim, cp;
  int64_t Bytes() const { return batch * (seq / cp) * heads * head_dim * 2; }
};

Shape ShapeOf(const benchmark::State& state) {
  return {1, 4096, state.range(0), state.range(1), 2};
}

// The seq -> heads pack of ops_ulysses.cc: [B, L, H, d] to [C][B][L][G][d].
RunCopy Pack(const Shape& s) {
  const int64_t l = s.seq / s.cp, g = s.heads / s.cp, d = s.head_dim, e = 2;
  RunCopy copy;
  const int64_t count[3] = {s.cp, s.batch, l};
  const int64_t src[3] = {g * d * e, l * s.heads * d * e, s.heads * d * e};
  const int64_t dst[3] = {s.batch * l * g * d * e, l * g * d * e, g * d * e};
  for (int k = 0; k < 3; ++k) {
    copy.count[k] = count[k];
    copy.src_stride_bytes[k] = src[k];
    copy.dst_stride_bytes[k] = dst[k];
  }
  copy.run_bytes = g * d * e;
  return copy;
}

// The unpack after the all-to-all: [C][B][L][G][d] to [B, S, G, d].
RunCopy Unpack(const Shape& s) {
  const int64_t l = s.seq / s.cp, g = s.heads / s.cp, d = s.head_dim, e = 2;
  RunCopy copy = Pack(s);
  const int64_t src[3] = {s.batch * l * g * d * e, l * g * d * e, g * d * e};
  const int64_t dst[3] = {l * g * d * e, s.seq * g * d * e, g * d * e};
  for (int k = 0; k < 3; ++k) {
    copy.src_stride_bytes[k] = src[k];
    copy.dst_stride_bytes[k] = dst[k];
  }
  return copy;
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
  const RunCopy copy = Pack(s);
  for (auto _ : state) {
    HostCopyRuns(out.data(), in.data(), copy);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * s.Bytes());
}

void BM_UlyssesUnpack(benchmark::State& state) {
  const Shape s = ShapeOf(state);
  std::vector<char> in(s.Bytes(), 1), out(s.Bytes());
  const RunCopy copy = Unpack(s);
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
