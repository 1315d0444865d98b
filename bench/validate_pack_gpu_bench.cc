// The Ulysses pack and unpack kernels of foldbench's NCCL backend
// (validate/cuda_kernels.h LaunchCopyRuns) against a device-to-device
// cudaMemcpyAsync of the same tensor, side by side in one run, timed with
// CUDA events: the target is pack / unpack at >= 80 % of the copy
// bandwidth (4.22-4.28 TB/s on an H200). Built with the NCCL backend;
// without a GPU it says so and exits 0.
//   build/validate_pack_gpu_bench
// Bytes count read + written (2 x the tensor), as the H200 compute profile
// (../shared/device/h200-compute-profile.json, permute_copy and
// d2d_copy_gbps) does, so its torch permute+contiguous figures compare
// directly. Shapes: the profile's, [B=1, S/C, H, d=128] bf16 per rank.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "validate/cuda_kernels.h"
#include "validate/ulysses_layout.h"

namespace {

using foldplan::validate::LaunchCopyRuns;
using foldplan::validate::RunCopy;

using foldplan::validate::UlyssesDirection;
using foldplan::validate::UlyssesMove;
using Shape = foldplan::validate::UlyssesShape;

Shape ShapeOf(const benchmark::State& state) {
  return {1, state.range(2), state.range(1), 128, state.range(0), 2};
}

bool HaveGpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

template <typename Body>
void TimeOnGpu(benchmark::State& state, const Shape& s, Body body) {
  if (!HaveGpu()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  void *in = nullptr, *out = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  if (cudaMalloc(&in, s.Bytes()) != cudaSuccess || cudaMalloc(&out, s.Bytes()) != cudaSuccess ||
      cudaStreamCreate(&stream) != cudaSuccess || cudaEventCreate(&start) != cudaSuccess ||
      cudaEventCreate(&stop) != cudaSuccess) {
    state.SkipWithError("CUDA setup failed");
    return;
  }
  cudaMemsetAsync(in, 1, s.Bytes(), stream);
  body(out, in, stream);  // warm-up
  for (auto _ : state) {
    cudaEventRecord(start, stream);
    body(out, in, stream);
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
  }
  if (cudaGetLastError() != cudaSuccess) state.SkipWithError("a CUDA call failed");
  state.SetBytesProcessed(state.iterations() * 2 * s.Bytes());  // read + written
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  cudaFree(in);
  cudaFree(out);
}

void BM_DeviceCopy(benchmark::State& state) {
  const Shape s = ShapeOf(state);
  TimeOnGpu(state, s, [&](void* out, const void* in, cudaStream_t stream) {
    cudaMemcpyAsync(out, in, s.Bytes(), cudaMemcpyDeviceToDevice, stream);
  });
}

void BM_UlyssesPackKernel(benchmark::State& state) {
  const Shape s = ShapeOf(state);
  // The seq -> heads pack.
  const RunCopy copy = UlyssesMove(s, UlyssesDirection::kSeqToHeads).pack;
  TimeOnGpu(state, s, [&](void* out, const void* in, cudaStream_t stream) {
    if (!LaunchCopyRuns(out, in, copy, stream).ok()) state.SkipWithError("launch failed");
  });
}

void BM_UlyssesUnpackKernel(benchmark::State& state) {
  const Shape s = ShapeOf(state);
  // The strided unpack after heads -> seq (seq -> heads unpacks into a
  // plain copy when B = 1).
  const RunCopy copy = UlyssesMove(s, UlyssesDirection::kHeadsToSeq).unpack;
  TimeOnGpu(state, s, [&](void* out, const void* in, cudaStream_t stream) {
    if (!LaunchCopyRuns(out, in, copy, stream).ok()) state.SkipWithError("launch failed");
  });
}

// {cp, heads, seq}: the profile's permute_copy shapes (and a GQA kv case).
#define SHAPES                                                                    \
  ->Args({2, 32, 8192})->Args({2, 64, 16384})->Args({2, 128, 32768})             \
      ->Args({4, 32, 8192})->Args({8, 8, 65536})->UseManualTime()                \
      ->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_DeviceCopy) SHAPES;
BENCHMARK(BM_UlyssesPackKernel) SHAPES;
BENCHMARK(BM_UlyssesUnpackKernel) SHAPES;

}  // namespace

int main(int argc, char** argv) {
  if (!HaveGpu()) {
    std::printf("validate_pack_gpu_bench: no CUDA device here; nothing measured\n");
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
