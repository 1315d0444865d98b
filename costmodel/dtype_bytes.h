// Bytes per element of the number formats the cost model counts, and the
// per-element bytes of the FP8 recipes' scales: the one home of these
// constants for the compute, memory and communication models.
#pragma once

#include "inputs/job.h"

namespace foldplan {

inline constexpr double kBf16Bytes = 2;  // bytes per bf16 element
inline constexpr double kFp32Bytes = 4;  // bytes per fp32 element
inline constexpr double kFp8Bytes = 1;   // bytes per e4m3 / e5m2 element

// Scale bytes per FP8 element:
//  - blockwise activations and gradients (and DeepEP's FP8 dispatch,
//    DeepSeek-V3's tiles): one fp32 scale per 1 x 128 elements, 4 / 128;
//  - blockwise weights: one fp32 scale per 128 x 128 block, 4 / 128^2;
//  - MXFP8: one E8M0 byte per 32 elements, 1 / 32 (the same as the first).
// Delayed and tensorwise scaling keep one fp32 scale per tensor: nothing
// per element.
inline constexpr double kFp8BlockScaleBytesPerElement = kFp32Bytes / 128;
inline constexpr double kFp8WeightBlockScaleBytesPerElement = kFp32Bytes / (128.0 * 128.0);
inline constexpr double kMxfp8ScaleBytesPerElement = 1.0 / 32;

// Bytes per element of a token the flex dispatcher sends in FP8 (under an
// FP8 recipe), scales included: e4m3 + an fp32 scale per 128 channels
// (DeepEP's FP8 dispatch), or MXFP8's E8M0 per 32 elements. 1.03125 either way.
inline constexpr double Fp8DispatchBytesPerElement(Precision precision) {
  return kFp8Bytes +
         (precision == Precision::kMXFP8 ? kMxfp8ScaleBytesPerElement : kFp8BlockScaleBytesPerElement);
}

}  // namespace foldplan
