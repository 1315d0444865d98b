// The data kernels the ops run on backend buffers, stated once here. The
// MPI backend runs the host versions below; the NCCL backend runs CUDA
// kernels (cuda_kernels.cu) that compute the same values through the same
// inline functions, which compile for host and device.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FOLDPLAN_HOST_DEVICE __host__ __device__
#else
#define FOLDPLAN_HOST_DEVICE
#endif

namespace foldplan::validate {

// A 3-D strided copy of contiguous runs: for every (i0, i1, i2) below
// `count`, copy `run_bytes` from src + sum(i_k src_stride_bytes[k]) to
// dst + sum(i_k dst_stride_bytes[k]). Ulysses' pack and unpack are each one.
struct RunCopy {
  int64_t count[3] = {1, 1, 1};
  int64_t src_stride_bytes[3] = {0, 0, 0};
  int64_t dst_stride_bytes[3] = {0, 0, 0};
  int64_t run_bytes = 0;
};

// bfloat16 <-> float, round to nearest even (no NaN inputs arise here).
FOLDPLAN_HOST_DEVICE inline float Bf16ToFloat(uint16_t bits) {
  const uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  memcpy(&value, &word, sizeof value);
  return value;
}
FOLDPLAN_HOST_DEVICE inline uint16_t FloatToBf16(float value) {
  uint32_t word;
  memcpy(&word, &value, sizeof word);
  word += 0x7FFFu + ((word >> 16) & 1u);
  return static_cast<uint16_t>(word >> 16);
}

// The dispatcher's verifiable expert function. Expert e, split over ETP
// ranks j = 0..ETP-1, maps a row x to sum_j partial_j(x) with
//   partial_j(x)[i] = (j == 0 ? x[i] : 0) + ExpertTerm(e, j, i),
// so the reduce-scatter over ETP must add every shard's term to the one
// copy of x. Inputs are small integers and terms are 0..3, so every value
// and sum stays an integer below 256 and is exact in bf16.
FOLDPLAN_HOST_DEVICE inline int ExpertTerm(int64_t expert, int etp_rank, int64_t i) {
  return static_cast<int>((expert * 3 + etp_rank * 5 + i) & 3);
}
FOLDPLAN_HOST_DEVICE inline uint16_t ExpertPartialValue(uint16_t x, int64_t expert, int etp_rank,
                                                        int64_t i) {
  const float base = etp_rank == 0 ? Bf16ToFloat(x) : 0.0f;
  return FloatToBf16(base + static_cast<float>(ExpertTerm(expert, etp_rank, i)));
}

// Host versions; each states the kernel's contract.

// dst, src: see RunCopy.
void HostCopyRuns(void* dst, const void* src, const RunCopy& copy);
// dst row r = src row rows[r], for r < count.
void HostGatherRows(void* dst, const void* src, const int64_t* rows, int64_t count,
                    int64_t row_bytes);
// In place: row r (of expert row_expert[r]) = ExpertPartialValue per element.
void HostExpertPartial(uint16_t* rows_bf16, int64_t count, int64_t hidden,
                       const int32_t* row_expert, int etp_rank);
// out[t][i] = sum over k = 0..top_k-1, in that order, of
// weights[t top_k + k] * bf16 value rows_bf16[rows[t top_k + k]][i], in f32.
void HostCombineRows(float* out, const uint16_t* rows_bf16, const int64_t* rows,
                     const float* weights, int64_t tokens, int64_t top_k, int64_t hidden);

}  // namespace foldplan::validate
