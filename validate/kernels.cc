#include "validate/kernels.h"

#include <algorithm>
#include <vector>

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

void MakeExpertGemmWeights(uint16_t* w1, uint16_t* w2, int64_t expert, int etp_rank,
                           int64_t hidden, int64_t ffn) {
  std::fill(w1, w1 + hidden * ffn, uint16_t{0});  // bf16 +0
  std::fill(w2, w2 + ffn * hidden, uint16_t{0});
  for (int64_t f = 0; f < ffn; ++f) {
    w1[ExpertGemmP1(expert, etp_rank, f, hidden) * ffn + f] =
        FloatToBf16(static_cast<float>(ExpertGemmS1(expert, etp_rank, f)));
  }
  for (int64_t i = 0; i < hidden; ++i) {
    w2[ExpertGemmP2(expert, etp_rank, i, ffn) * hidden + i] = FloatToBf16(1.0f);
  }
}

// Blocks of kRows rows of a share each row of b (converted to f32 once per
// block) and keep their f32 accumulators (kRows x n) in cache; four rows
// of b are applied per pass over an accumulator, still one product and one
// sum at a time in order, so each output's sum runs over p = 0..k-1 in
// order, from +0 (host code is built with -ffp-contract=off).
void HostGemmBf16(uint16_t* c, const uint16_t* a, const uint16_t* b, int64_t m, int64_t k,
                  int64_t n) {
  constexpr int64_t kRows = 8, kDepth = 4;
  std::vector<float> acc(static_cast<size_t>(kRows * n)), b_rows(static_cast<size_t>(kDepth * n));
  for (int64_t r0 = 0; r0 < m; r0 += kRows) {
    const int64_t rows = std::min(kRows, m - r0);
    std::fill(acc.begin(), acc.begin() + rows * n, 0.0f);
    for (int64_t p0 = 0; p0 < k; p0 += kDepth) {
      const int64_t depth = std::min(kDepth, k - p0);
      for (int64_t j = 0; j < depth * n; ++j) b_rows[j] = Bf16ToFloat(b[p0 * n + j]);
      const float* b0 = b_rows.data();
      const float *b1 = b0 + n, *b2 = b1 + n, *b3 = b2 + n;
      for (int64_t r = 0; r < rows; ++r) {
        const uint16_t* x = a + (r0 + r) * k + p0;
        float* out = acc.data() + r * n;
        if (depth == kDepth) {
          const float x0 = Bf16ToFloat(x[0]), x1 = Bf16ToFloat(x[1]), x2 = Bf16ToFloat(x[2]),
                      x3 = Bf16ToFloat(x[3]);
          for (int64_t j = 0; j < n; ++j) {
            out[j] = (((out[j] + x0 * b0[j]) + x1 * b1[j]) + x2 * b2[j]) + x3 * b3[j];
          }
        } else {
          for (int64_t d = 0; d < depth; ++d) {
            const float xd = Bf16ToFloat(x[d]);
            const float* bd = b0 + d * n;
            for (int64_t j = 0; j < n; ++j) out[j] += xd * bd[j];
          }
        }
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < n; ++j) c[(r0 + r) * n + j] = FloatToBf16(acc[r * n + j]);
    }
  }
}

void HostExpertGemm(uint16_t* rows_bf16, const int64_t* rows_per_expert, int64_t experts,
                    int64_t hidden, int64_t ffn, const uint16_t* const* w1,
                    const uint16_t* const* w2, uint16_t* scratch) {
  int64_t first = 0;
  for (int64_t g = 0; g < experts; ++g) {
    const int64_t rows = rows_per_expert[g];
    uint16_t* x = rows_bf16 + first * hidden;
    uint16_t* h = scratch + first * ffn;
    HostGemmBf16(h, x, w1[g], rows, hidden, ffn);
    HostGemmBf16(x, h, w2[g], rows, ffn, hidden);
    first += rows;
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
