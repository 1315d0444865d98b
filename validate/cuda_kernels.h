// Launchers of the CUDA versions of kernels.h's kernels (cuda_kernels.cu),
// internal to the NCCL backend builds (FOLDPLAN_HAVE_NCCL), plus the fill
// the compute op uses. No CUDA types here, so that files compiled by the
// host compiler include it: `stream` is a cudaStream_t passed as void*.
// Contract of every launcher: all pointers are device memory
// (Backend::Alloc, or inside such a buffer); the work is queued on `stream`
// and the call returns at once; the Status names the kernel and the CUDA
// error of the launch (a fault while it runs shows at the next call that
// waits for the stream). Nothing is launched for empty work. Values are the
// host versions' exactly, bit for bit (cuda_kernel_bodies.h says how).
#pragma once

#include <cstdint>

#include "core/status.h"
#include "validate/kernels.h"

namespace foldplan::validate {

// HostCopyRuns on the device: 16-byte loads and stores when the buffers,
// run_bytes and the strides of every dimension of count > 1 are multiples
// of 16 (else 8, 4, 2 or 1 bytes); at most 2^32 - 1 runs of < 2^35 bytes.
Status LaunchCopyRuns(void* dst, const void* src, const RunCopy& copy, void* stream);
// HostGatherRows on the device; `rows` is device memory too.
Status LaunchGatherRows(void* dst, const void* src, const int64_t* rows, int64_t count,
                        int64_t row_bytes, void* stream);
// HostExpertPartial on the device; `row_expert` is device memory too.
Status LaunchExpertPartial(uint16_t* rows_bf16, int64_t count, int64_t hidden,
                           const int32_t* row_expert, int etp_rank, void* stream);
// HostCombineRows on the device (same f32 operations in the same order,
// k = 0..top_k-1, no fused multiply-add); `rows`, `weights` device memory.
Status LaunchCombineRows(float* out, const uint16_t* rows_bf16, const int64_t* rows,
                         const float* weights, int64_t tokens, int64_t top_k, int64_t hidden,
                         void* stream);

// A small integer in [-2, 2] that element `index` of a GEMM operand filled
// with `seed` holds: products of two are at most 4 in size, so dot products
// of up to 2^22 terms stay exact in f32 and the compute op's check can
// predict every output element exactly.
FOLDPLAN_HOST_DEVICE inline int SmallIntValue(uint64_t seed, uint64_t index) {
  uint64_t z = index * 0x9E3779B97F4A7C15ULL + seed * 0xD1B54A32D192ED03ULL + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<int>(z % 5) - 2;
}
// data_bf16[i] = SmallIntValue(seed, i) as bf16 (exact), for i < count.
Status LaunchFillSmallInts(uint16_t* data_bf16, int64_t count, uint64_t seed, void* stream);

}  // namespace foldplan::validate
