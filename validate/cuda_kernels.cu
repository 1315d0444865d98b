// The CUDA kernels of the NCCL backend (contract: cuda_kernels.h). Each
// kernel is a thin wrapper of a per-thread body in cuda_kernel_bodies.h;
// this file picks the launch shape and the access width. The only file
// nvcc compiles: the rest of the backend is host code.
#include "validate/cuda_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "validate/cuda_kernel_bodies.h"

namespace foldplan::validate {
namespace {

using cuda::CopyLaunch;
using cuda::FastDiv;
using cuda::kCopyThreads;
using cuda::kRowThreads;

Status LaunchStatus(const char* kernel) {
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return Status();
  return Status::Error(std::string(kernel) + " kernel launch failed: " +
                       cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

template <typename V, typename Runs>
__global__ void __launch_bounds__(kCopyThreads)
    CopyVectorsKernel(Runs runs, char* dst, const char* src, FastDiv per_run, uint64_t total) {
  cuda::CopyVectorsBlock<V>(runs, dst, src, per_run, total, blockIdx.x, threadIdx.x, blockDim.x);
}

template <int kElems>
__global__ void __launch_bounds__(kRowThreads)
    ExpertPartialKernel(uint16_t* rows_bf16, int64_t count, int64_t hidden,
                        const int32_t* row_expert, int etp_rank) {
  for (int64_t row = blockIdx.x; row < count; row += gridDim.x) {
    cuda::ExpertPartialRow<kElems>(rows_bf16, hidden, row_expert, etp_rank, row, threadIdx.x,
                                   blockDim.x);
  }
}

template <int kElems>
__global__ void __launch_bounds__(kRowThreads)
    CombineRowsKernel(float* out, const uint16_t* rows_bf16, const int64_t* rows,
                      const float* weights, int64_t tokens, int64_t top_k, int64_t hidden) {
  for (int64_t token = blockIdx.x; token < tokens; token += gridDim.x) {
    cuda::CombineRowsToken<kElems>(out, rows_bf16, rows, weights, top_k, hidden, token,
                                   threadIdx.x, blockDim.x);
  }
}

__global__ void FillSmallIntsKernel(uint16_t* data_bf16, int64_t count, uint64_t seed) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += step) {
    data_bf16[i] = FloatToBf16(static_cast<float>(SmallIntValue(seed, static_cast<uint64_t>(i))));
  }
}

// Runs a planned copy with the planned access width.
template <typename Runs>
Status LaunchCopy(const char* kernel, const std::string& refusal, const CopyLaunch<Runs>& plan,
                  void* dst, const void* src, void* stream) {
  if (!refusal.empty()) return Status::Error(std::string(kernel) + ": " + refusal);
  if (plan.width == 0) return Status();
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  const dim3 grid(static_cast<unsigned>(plan.blocks));
  auto queue = static_cast<cudaStream_t>(stream);
  const Runs& p = plan.placement;
  switch (plan.width) {
    case 16:
      CopyVectorsKernel<cuda::Vec16><<<grid, kCopyThreads, 0, queue>>>(p, d, s, plan.per_run,
                                                                       plan.total);
      break;
    case 8:
      CopyVectorsKernel<cuda::Vec8><<<grid, kCopyThreads, 0, queue>>>(p, d, s, plan.per_run,
                                                                      plan.total);
      break;
    case 4:
      CopyVectorsKernel<uint32_t><<<grid, kCopyThreads, 0, queue>>>(p, d, s, plan.per_run,
                                                                    plan.total);
      break;
    case 2:
      CopyVectorsKernel<uint16_t><<<grid, kCopyThreads, 0, queue>>>(p, d, s, plan.per_run,
                                                                    plan.total);
      break;
    default:
      CopyVectorsKernel<uint8_t><<<grid, kCopyThreads, 0, queue>>>(p, d, s, plan.per_run,
                                                                   plan.total);
      break;
  }
  return LaunchStatus(kernel);
}

}  // namespace

Status LaunchCopyRuns(void* dst, const void* src, const RunCopy& copy, void* stream) {
  CopyLaunch<cuda::StridedRuns> plan;
  const std::string refusal = cuda::PlanCopyRuns(dst, src, copy, &plan);
  return LaunchCopy("CopyRuns", refusal, plan, dst, src, stream);
}

Status LaunchGatherRows(void* dst, const void* src, const int64_t* rows, int64_t count,
                        int64_t row_bytes, void* stream) {
  CopyLaunch<cuda::GatheredRows> plan;
  const std::string refusal = cuda::PlanGatherRows(dst, src, rows, count, row_bytes, &plan);
  return LaunchCopy("GatherRows", refusal, plan, dst, src, stream);
}

Status LaunchExpertPartial(uint16_t* rows_bf16, int64_t count, int64_t hidden,
                           const int32_t* row_expert, int etp_rank, void* stream) {
  if (count <= 0 || hidden <= 0) return Status();
  const bool wide = cuda::ExpertPartialWide(rows_bf16, hidden);
  const int threads = cuda::RowThreads(wide ? hidden / 8 : hidden);
  const dim3 grid(static_cast<unsigned>(cuda::RowBlocks(count)));
  auto queue = static_cast<cudaStream_t>(stream);
  if (wide) {
    ExpertPartialKernel<8><<<grid, threads, 0, queue>>>(rows_bf16, count, hidden, row_expert,
                                                        etp_rank);
  } else {
    ExpertPartialKernel<1><<<grid, threads, 0, queue>>>(rows_bf16, count, hidden, row_expert,
                                                        etp_rank);
  }
  return LaunchStatus("ExpertPartial");
}

Status LaunchCombineRows(float* out, const uint16_t* rows_bf16, const int64_t* rows,
                         const float* weights, int64_t tokens, int64_t top_k, int64_t hidden,
                         void* stream) {
  if (tokens <= 0 || hidden <= 0) return Status();
  const bool wide = cuda::CombineRowsWide(out, rows_bf16, hidden);
  const int threads = cuda::RowThreads(wide ? hidden / 4 : hidden);
  const dim3 grid(static_cast<unsigned>(cuda::RowBlocks(tokens)));
  auto queue = static_cast<cudaStream_t>(stream);
  if (wide) {
    CombineRowsKernel<4><<<grid, threads, 0, queue>>>(out, rows_bf16, rows, weights, tokens,
                                                      top_k, hidden);
  } else {
    CombineRowsKernel<1><<<grid, threads, 0, queue>>>(out, rows_bf16, rows, weights, tokens,
                                                      top_k, hidden);
  }
  return LaunchStatus("CombineRows");
}

Status LaunchFillSmallInts(uint16_t* data_bf16, int64_t count, uint64_t seed, void* stream) {
  if (count <= 0) return Status();
  const int64_t threads = 256;
  const int64_t blocks = std::min<int64_t>((count + threads - 1) / threads, 8192);
  FillSmallIntsKernel<<<static_cast<unsigned>(blocks), threads, 0,
                        static_cast<cudaStream_t>(stream)>>>(data_bf16, count, seed);
  return LaunchStatus("FillSmallInts");
}

}  // namespace foldplan::validate
