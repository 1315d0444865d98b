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

// The GEMM expert function (foldbench --expert gemm): shard j of expert e
// is a real expert MLP without activation, two bf16 GEMMs with f32
// accumulation, each output rounded once to bf16:
//   h = x W1   ([m x H] x [H x Fj] -> [m x Fj], rounded to bf16)
//   y = h W2   ([m x Fj] x [Fj x H] -> [m x H], rounded to bf16)
// with Fj = moe_ffn_hidden / etp. The weights are dense bf16 matrices (the
// GEMMs cost what real ones do) with one nonzero per column:
//   W1[i][f] = s1(e, j, f) if i == p1(e, j, f), else 0   (s1 = +-1)
//   W2[f][i] = 1           if f == p2(e, j, i), else 0
// with p1 in [0, H) and p2 in [0, Fj) hashed (ExpertGemmHash). Then
//   h[f] = s1(f) x[p1(f)]   and   y[i] = h[p2(i)] = s1(p2(i)) x[p1(p2(i))]
// exactly: each output is an f32 sum of one nonzero product and zeros,
// exact in any summation order, and x holds small integers (0..7 in
// dispatch), so h and y are integers in [-7, 7], exact in bf16. The ETP
// reduce-scatter sums the shards, so expert e's output is
//   sum_j y_j[i] = sum_j s1(e, j, p2(e, j, i)) x[p1(e, j, p2(e, j, i))],
// an integer of magnitude at most 7 etp (exact in bf16 for etp <= 36).
// (A zero product may be -0; -0 and +0 compare equal in the check.)
FOLDPLAN_HOST_DEVICE inline uint32_t Mix32(uint32_t x) {  // "lowbias32", a bijection
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}
// A cheap hash of (which, e, j, index); `which` separates p1, s1 and p2.
FOLDPLAN_HOST_DEVICE inline uint32_t ExpertGemmHash(uint32_t which, int64_t expert, int etp_rank,
                                                    int64_t index) {
  const uint32_t key = Mix32(static_cast<uint32_t>(expert) * 0x9E3779B1u +
                             static_cast<uint32_t>(etp_rank) * 0x85EBCA77u + which);
  return Mix32(key ^ static_cast<uint32_t>(index));
}
// p1(e, j, f): the row of W1's column f that holds its nonzero, in [0, hidden).
FOLDPLAN_HOST_DEVICE inline int64_t ExpertGemmP1(int64_t expert, int etp_rank, int64_t f,
                                                 int64_t hidden) {
  return static_cast<int64_t>(ExpertGemmHash(1, expert, etp_rank, f) %
                              static_cast<uint64_t>(hidden));
}
// s1(e, j, f): that nonzero, +1 or -1.
FOLDPLAN_HOST_DEVICE inline int ExpertGemmS1(int64_t expert, int etp_rank, int64_t f) {
  return (ExpertGemmHash(2, expert, etp_rank, f) & 1u) != 0 ? -1 : 1;
}
// p2(e, j, i): the row of W2's column i that holds its 1, in [0, ffn).
FOLDPLAN_HOST_DEVICE inline int64_t ExpertGemmP2(int64_t expert, int etp_rank, int64_t i,
                                                 int64_t ffn) {
  return static_cast<int64_t>(ExpertGemmHash(3, expert, etp_rank, i) %
                              static_cast<uint64_t>(ffn));
}
// The closed form of shard j's output element i, y_j[i], for a row x of
// `hidden` bf16 words (ffn = Fj): s1(p2(i)) x[p1(p2(i))].
FOLDPLAN_HOST_DEVICE inline float ExpertGemmShardValue(const uint16_t* x, int64_t expert,
                                                       int etp_rank, int64_t i, int64_t hidden,
                                                       int64_t ffn) {
  const int64_t f = ExpertGemmP2(expert, etp_rank, i, ffn);
  const float value = Bf16ToFloat(x[ExpertGemmP1(expert, etp_rank, f, hidden)]);
  return ExpertGemmS1(expert, etp_rank, f) < 0 ? -value : value;
}
// Expert e's output element i after the ETP reduce-scatter, for each expert
// function: `term` x[i] + sum_j ExpertTerm(e, j, i); `gemm` sum_j y_j[i].
// Summed in j order in f32 (every partial sum is a small integer, exact).
FOLDPLAN_HOST_DEVICE inline float ExpertTermOutput(const uint16_t* x, int64_t expert, int etp,
                                                   int64_t i) {
  float y = Bf16ToFloat(x[i]);
  for (int j = 0; j < etp; ++j) y += static_cast<float>(ExpertTerm(expert, j, i));
  return y;
}
FOLDPLAN_HOST_DEVICE inline float ExpertGemmOutput(const uint16_t* x, int64_t expert, int etp,
                                                   int64_t i, int64_t hidden, int64_t ffn) {
  float y = 0.0f;
  for (int j = 0; j < etp; ++j) y += ExpertGemmShardValue(x, expert, j, i, hidden, ffn);
  return y;
}
// Dense row-major weights of shard j of expert e, from the formula above:
// w1 [hidden x ffn], w2 [ffn x hidden], every element written.
void MakeExpertGemmWeights(uint16_t* w1, uint16_t* w2, int64_t expert, int etp_rank,
                           int64_t hidden, int64_t ffn);

// Host versions; each states the kernel's contract.

// dst, src: see RunCopy.
void HostCopyRuns(void* dst, const void* src, const RunCopy& copy);
// dst row r = src row rows[r], for r < count.
void HostGatherRows(void* dst, const void* src, const int64_t* rows, int64_t count,
                    int64_t row_bytes);
// In place: row r (of expert row_expert[r]) = ExpertPartialValue per element.
void HostExpertPartial(uint16_t* rows_bf16, int64_t count, int64_t hidden,
                       const int32_t* row_expert, int etp_rank);
// c [m x n] = bf16(a [m x k] x b [k x n]), all row-major bf16: every
// output an f32 sum over k = 0..k-1 in that order of the exact products,
// rounded once to bf16 (nearest even). c must not overlap a or b.
void HostGemmBf16(uint16_t* c, const uint16_t* a, const uint16_t* b, int64_t m, int64_t k,
                  int64_t n);
// The expert GEMMs on rows grouped by expert (Backend::ExpertGemm): for
// expert g of rows_per_expert.size(), its R_g rows [R_g x hidden] starting
// at row R_0 + ... + R_{g-1} of rows_bf16 become bf16(bf16(rows w1[g]) w2[g])
// (HostGemmBf16 twice, w1[g] [hidden x ffn], w2[g] [ffn x hidden]), h kept
// in scratch ([sum R_g x ffn]).
void HostExpertGemm(uint16_t* rows_bf16, const int64_t* rows_per_expert, int64_t experts,
                    int64_t hidden, int64_t ffn, const uint16_t* const* w1,
                    const uint16_t* const* w2, uint16_t* scratch);
// out[t][i] = sum over k = 0..top_k-1, in that order, of
// weights[t top_k + k] * bf16 value rows_bf16[rows[t top_k + k]][i], in f32.
void HostCombineRows(float* out, const uint16_t* rows_bf16, const int64_t* rows,
                     const float* weights, int64_t tokens, int64_t top_k, int64_t hidden);

}  // namespace foldplan::validate
