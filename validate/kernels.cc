#include "validate/kernels.h"

namespace foldplan::validate {

void HostCopyRuns(void* dst, const void* src, const RunCopy& copy) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  for (int64_t a = 0; a < copy.count[0]; ++a)
    for (int64_t b = 0; b < copy.count[1]; ++b)
      for (int64_t c = 0; c < copy.count[2]; ++c) {
        const int64_t from = a * copy.src_stride_bytes[0] + b * copy.src_stride_bytes[1] +
                             c * copy.src_stride_bytes[2];
        const int64_t to = a * copy.dst_stride_bytes[0] + b * copy.dst_stride_bytes[1] +
                           c * copy.dst_stride_bytes[2];
        std::memcpy(d + to, s + from, static_cast<size_t>(copy.run_bytes));
      }
}

void HostGatherRows(void* dst, const void* src, const int64_t* rows, int64_t count,
                    int64_t row_bytes) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  for (int64_t r = 0; r < count; ++r) {
    std::memcpy(d + r * row_bytes, s + rows[r] * row_bytes, static_cast<size_t>(row_bytes));
  }
}

void HostExpertPartial(uint16_t* rows_bf16, int64_t count, int64_t hidden,
                       const int32_t* row_expert, int etp_rank) {
  for (int64_t r = 0; r < count; ++r) {
    uint16_t* row = rows_bf16 + r * hidden;
    for (int64_t i = 0; i < hidden; ++i) {
      row[i] = ExpertPartialValue(row[i], row_expert[r], etp_rank, i);
    }
  }
}

void HostCombineRows(float* out, const uint16_t* rows_bf16, const int64_t* rows,
                     const float* weights, int64_t tokens, int64_t top_k, int64_t hidden) {
  for (int64_t t = 0; t < tokens; ++t) {
    float* o = out + t * hidden;
    for (int64_t i = 0; i < hidden; ++i) o[i] = 0.0f;
    for (int64_t k = 0; k < top_k; ++k) {
      const float w = weights[t * top_k + k];
      const uint16_t* row = rows_bf16 + rows[t * top_k + k] * hidden;
      for (int64_t i = 0; i < hidden; ++i) o[i] += w * Bf16ToFloat(row[i]);
    }
  }
}

}  // namespace foldplan::validate
