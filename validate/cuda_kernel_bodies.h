// What one CUDA thread of each cuda_kernels.cu kernel does, written as
// plain functions of (block, thread, threads) that compile for the device
// and for the host alike. The kernels are one-line wrappers of these; the
// host compiler builds them too, so tests/validate_cuda_kernels_test.cc
// runs every thread of a launch on the CPU and compares with kernels.h's
// host versions, in every build, GPU or not.
//
// Exactness: the values are the host kernels' bit for bit: the same inline
// functions of kernels.h, and in CombineRows the same f32 products and sums
// in the same order, with round-to-nearest intrinsics on the device so that
// nvcc cannot contract a multiply and an add into an FMA.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "validate/kernels.h"

// "#pragma unroll" for nvcc; nothing for the host compiler (which would
// warn about a pragma it does not know).
#if defined(__CUDACC__)
#define FOLDPLAN_UNROLL _Pragma("unroll")
#else
#define FOLDPLAN_UNROLL
#endif

namespace foldplan::validate::cuda {

#if defined(__CUDACC__)
using Vec16 = uint4;  // one 16-byte load or store (ld.global.v4)
using Vec8 = uint2;
#else
struct alignas(16) Vec16 {
  uint32_t x, y, z, w;
};
struct alignas(8) Vec8 {
  uint32_t x, y;
};
#endif

FOLDPLAN_HOST_DEVICE inline uint32_t MulHi(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}
FOLDPLAN_HOST_DEVICE inline float MulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
FOLDPLAN_HOST_DEVICE inline float AddRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// One access of type V at `p` (aligned to sizeof(V)): a plain vector load
// or store on the device, memcpy on the host (no aliasing questions there).
template <typename V>
FOLDPLAN_HOST_DEVICE inline V Load(const void* p) {
#if defined(__CUDA_ARCH__)
  return *static_cast<const V*>(p);
#else
  V value;
  memcpy(&value, p, sizeof value);
  return value;
#endif
}
template <typename V>
FOLDPLAN_HOST_DEVICE inline void Store(void* p, const V& value) {
#if defined(__CUDA_ARCH__)
  *static_cast<V*>(p) = value;
#else
  memcpy(p, &value, sizeof value);
#endif
}

// n / d for any 32-bit n and a divisor 1 <= d < 2^32 fixed at launch, as a
// multiply-high, an add and a shift (Granlund and Montgomery's round-up
// method; the add is done in 64 bits so it cannot overflow):
// shift = ceil(log2 d), multiplier = floor(2^32 (2^shift - d) / d) + 1.
struct FastDiv {
  uint32_t divisor = 1, multiplier = 1, shift = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t d) : divisor(d) {
    while ((uint64_t{1} << shift) < d) ++shift;
    multiplier = static_cast<uint32_t>(
        ((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  FOLDPLAN_HOST_DEVICE uint32_t Div(uint32_t n) const {
    return static_cast<uint32_t>((static_cast<uint64_t>(MulHi(n, multiplier)) + n) >> shift);
  }
};

// Launch shape of the run copies: 256 threads, each moving kUnroll vectors
// (all loads issued before the first store, so every thread keeps kUnroll
// loads in flight).
constexpr uint32_t kCopyThreads = 256;
constexpr uint32_t kCopyUnroll = 4;

// Byte offsets of run `run` for CopyRuns: run = (i0 c1 + i1) c2 + i2.
struct StridedRuns {
  int64_t src_stride[3] = {0, 0, 0}, dst_stride[3] = {0, 0, 0};
  FastDiv count2, count1;
  FOLDPLAN_HOST_DEVICE void Offsets(uint32_t run, int64_t* src, int64_t* dst) const {
    const uint32_t q = count2.Div(run);
    const uint32_t i2 = run - q * count2.divisor;
    const uint32_t i0 = count1.Div(q);
    const uint32_t i1 = q - i0 * count1.divisor;
    *src = i0 * src_stride[0] + i1 * src_stride[1] + i2 * src_stride[2];
    *dst = i0 * dst_stride[0] + i1 * dst_stride[1] + i2 * dst_stride[2];
  }
};

// Byte offsets of run (row) `run` for GatherRows.
struct GatheredRows {
  const int64_t* rows = nullptr;
  int64_t row_bytes = 0;
  FOLDPLAN_HOST_DEVICE void Offsets(uint32_t run, int64_t* src, int64_t* dst) const {
    *src = rows[run] * row_bytes;
    *dst = static_cast<int64_t>(run) * row_bytes;
  }
};

// Block `block` of a copy of `runs` (fewer than 2^32) runs of `per_run`
// vectors of type V each: the flat index v = run * per_run + vector covers
// [0, total); the block moves v in [block W, (block + 1) W) with W =
// threads * kCopyUnroll, thread t the ones at t + u threads. Consecutive
// threads touch consecutive vectors of a run (coalesced on both sides).
// Needs per_run.divisor + W <= 2^32 (the launcher checks per_run < 2^31).
template <typename V, typename Runs>
FOLDPLAN_HOST_DEVICE void CopyVectorsBlock(const Runs& runs, char* dst, const char* src,
                                           FastDiv per_run, uint64_t total, uint64_t block,
                                           uint32_t thread, uint32_t threads) {
  const uint64_t base = block * threads * kCopyUnroll;
  const uint64_t run0 = base / per_run.divisor;  // once per thread, in 64 bits
  const uint32_t offset0 = static_cast<uint32_t>(base - run0 * per_run.divisor);
  V value[kCopyUnroll];
  int64_t to[kCopyUnroll];
  bool live[kCopyUnroll];
FOLDPLAN_UNROLL
  for (uint32_t u = 0; u < kCopyUnroll; ++u) {
    const uint32_t local = thread + u * threads;
    value[u] = V{};
    to[u] = 0;
    live[u] = base + local < total;
    if (!live[u]) continue;
    const uint32_t n = offset0 + local;
    const uint32_t q = per_run.Div(n);
    const uint32_t vector = n - q * per_run.divisor;
    int64_t from = 0;
    runs.Offsets(static_cast<uint32_t>(run0 + q), &from, &to[u]);
    const int64_t within = static_cast<int64_t>(vector) * static_cast<int64_t>(sizeof(V));
    value[u] = Load<V>(src + from + within);
    to[u] += within;
  }
FOLDPLAN_UNROLL
  for (uint32_t u = 0; u < kCopyUnroll; ++u) {
    if (live[u]) Store<V>(dst + to[u], value[u]);
  }
}

// Row `row` of ExpertPartial, kElems (1 or 8) elements per step; kElems 8
// needs hidden % 8 == 0 and a 16-byte aligned buffer.
template <int kElems>
FOLDPLAN_HOST_DEVICE void ExpertPartialRow(uint16_t* rows_bf16, int64_t hidden,
                                           const int32_t* row_expert, int etp_rank,
                                           int64_t row, uint32_t thread, uint32_t threads) {
  uint16_t* data = rows_bf16 + row * hidden;
  const int64_t expert = row_expert[row];
  for (int64_t i = static_cast<int64_t>(thread) * kElems; i < hidden;
       i += static_cast<int64_t>(threads) * kElems) {
    if constexpr (kElems == 8) {
      Vec16 chunk = Load<Vec16>(data + i);
      uint16_t x[8];
      memcpy(x, &chunk, sizeof chunk);
FOLDPLAN_UNROLL
      for (int j = 0; j < 8; ++j) x[j] = ExpertPartialValue(x[j], expert, etp_rank, i + j);
      memcpy(&chunk, x, sizeof chunk);
      Store<Vec16>(data + i, chunk);
    } else {
      data[i] = ExpertPartialValue(data[i], expert, etp_rank, i);
    }
  }
}

// Token `token` of CombineRows, kElems (1 or 4) outputs per step; kElems 4
// needs hidden % 4 == 0, `out` 16-byte and `rows_bf16` 8-byte aligned.
template <int kElems>
FOLDPLAN_HOST_DEVICE void CombineRowsToken(float* out, const uint16_t* rows_bf16,
                                           const int64_t* rows, const float* weights,
                                           int64_t top_k, int64_t hidden, int64_t token,
                                           uint32_t thread, uint32_t threads) {
  float* o = out + token * hidden;
  for (int64_t i = static_cast<int64_t>(thread) * kElems; i < hidden;
       i += static_cast<int64_t>(threads) * kElems) {
    float sum[kElems];
FOLDPLAN_UNROLL
    for (int j = 0; j < kElems; ++j) sum[j] = 0.0f;
    for (int64_t k = 0; k < top_k; ++k) {
      const float w = weights[token * top_k + k];
      const uint16_t* row = rows_bf16 + rows[token * top_k + k] * hidden + i;
      uint16_t x[kElems];
      if constexpr (kElems == 4) {
        const Vec8 chunk = Load<Vec8>(row);
        memcpy(x, &chunk, sizeof chunk);
      } else {
        x[0] = row[0];
      }
FOLDPLAN_UNROLL
      for (int j = 0; j < kElems; ++j) sum[j] = AddRn(sum[j], MulRn(w, Bf16ToFloat(x[j])));
    }
    if constexpr (kElems == 4) {
      Vec16 chunk;
      memcpy(&chunk, sum, sizeof chunk);
      Store<Vec16>(o + i, chunk);
    } else {
      o[i] = sum[0];
    }
  }
}

// Launch planning (host side), shared by cuda_kernels.cu and the test that
// runs these bodies on the CPU, so that the test covers it too.

// How one copy launch goes: `width` bytes per access (16, 8, 4, 2 or 1;
// 0: nothing to copy), `blocks` blocks of kCopyThreads over `total`
// accesses, `per_run` accesses per run.
template <typename Runs>
struct CopyLaunch {
  Runs placement;
  int width = 0;
  FastDiv per_run;
  uint64_t total = 0, blocks = 0;
};

// The widest access, 16, 8, 4, 2 or 1 bytes, that divides `bits`.
inline int AccessWidth(uint64_t bits) {
  for (int width : {16, 8, 4, 2}) {
    if (bits % width == 0) return width;
  }
  return 1;
}

inline uint64_t AddressBits(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer); }

// Fills `launch` for `runs` runs of `run_bytes`; `align` ORs every address
// and stride the access width must divide. Returns an error text, or
// nothing when the launch is possible.
template <typename Runs>
std::string PlanCopy(uint64_t runs, int64_t run_bytes, uint64_t align, CopyLaunch<Runs>* launch) {
  launch->width = 0;
  if (runs == 0 || run_bytes <= 0) return "";
  if (runs > UINT32_MAX) return std::to_string(runs) + " runs, more than the kernel's 2^32 - 1";
  const int width = AccessWidth(align | static_cast<uint64_t>(run_bytes));
  const uint64_t per_run = static_cast<uint64_t>(run_bytes) / width;
  if (per_run >= (uint64_t{1} << 31)) {
    return "runs of " + std::to_string(run_bytes) +
           " bytes, longer than the kernel's 2^31 accesses";
  }
  const uint64_t total = runs * per_run;
  const uint64_t per_block = uint64_t{kCopyThreads} * kCopyUnroll;
  const uint64_t blocks = (total + per_block - 1) / per_block;
  if (blocks > static_cast<uint64_t>(INT32_MAX)) {
    return std::to_string(total * width) + " bytes, more than one launch covers";
  }
  launch->width = width;
  launch->per_run = FastDiv(static_cast<uint32_t>(per_run));
  launch->total = total;
  launch->blocks = blocks;
  return "";
}

inline std::string PlanCopyRuns(void* dst, const void* src, const RunCopy& copy,
                                CopyLaunch<StridedRuns>* launch) {
  launch->width = 0;
  for (int k = 0; k < 3; ++k) {
    if (copy.count[k] <= 0) return "";
  }
  uint64_t runs = 1;
  uint64_t align = AddressBits(dst) | AddressBits(src);
  for (int k = 0; k < 3; ++k) {
    // Each factor and each partial product below 2^32: no overflow.
    if (copy.count[k] > UINT32_MAX ||
        (runs *= static_cast<uint64_t>(copy.count[k])) > UINT32_MAX) {
      return "more than the kernel's 2^32 - 1 runs";
    }
    if (copy.count[k] > 1) {  // a stride of a dimension of one is never used
      align |= static_cast<uint64_t>(copy.src_stride_bytes[k]) |
               static_cast<uint64_t>(copy.dst_stride_bytes[k]);
    }
    launch->placement.src_stride[k] = copy.src_stride_bytes[k];
    launch->placement.dst_stride[k] = copy.dst_stride_bytes[k];
  }
  launch->placement.count2 = FastDiv(static_cast<uint32_t>(copy.count[2]));
  launch->placement.count1 = FastDiv(static_cast<uint32_t>(copy.count[1]));
  return PlanCopy(runs, copy.run_bytes, align, launch);
}

inline std::string PlanGatherRows(void* dst, const void* src, const int64_t* rows, int64_t count,
                                  int64_t row_bytes, CopyLaunch<GatheredRows>* launch) {
  launch->width = 0;
  if (count <= 0) return "";
  launch->placement.rows = rows;
  launch->placement.row_bytes = row_bytes;
  return PlanCopy(static_cast<uint64_t>(count), row_bytes, AddressBits(dst) | AddressBits(src),
                  launch);
}

// The row kernels: one row (token) per block and grid-stride step, up to
// kRowThreads threads, at most kMaxRowBlocks blocks.
constexpr int64_t kRowThreads = 256;
constexpr int64_t kMaxRowBlocks = int64_t{1} << 20;
inline int RowThreads(int64_t units_per_row) {
  const int64_t warps = (units_per_row + 31) / 32;
  return static_cast<int>(warps >= kRowThreads / 32 ? kRowThreads : (warps < 1 ? 1 : warps) * 32);
}
inline int64_t RowBlocks(int64_t rows) { return rows < kMaxRowBlocks ? rows : kMaxRowBlocks; }
// Whether ExpertPartialRow<8> / CombineRowsToken<4> may run.
inline bool ExpertPartialWide(const uint16_t* rows_bf16, int64_t hidden) {
  return hidden % 8 == 0 && AddressBits(rows_bf16) % 16 == 0;
}
inline bool CombineRowsWide(const float* out, const uint16_t* rows_bf16, int64_t hidden) {
  return hidden % 4 == 0 && AddressBits(out) % 16 == 0 && AddressBits(rows_bf16) % 8 == 0;
}

}  // namespace foldplan::validate::cuda
