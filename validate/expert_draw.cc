#include "validate/expert_draw.h"

#include <cmath>
#include <numeric>

#include "core/mix64.h"
#include "validate/pattern.h"

namespace foldplan::validate {

std::vector<double> ExpertWeights(int64_t experts, bool skewed, double skew) {
  std::vector<double> w(static_cast<size_t>(experts), 1.0);
  if (skewed) {
    for (int64_t e = 0; e < experts; ++e) w[e] = 1.0 / std::pow(e + 1.0, skew);
  }
  return w;
}

void DrawExperts(const std::vector<double>& weights, int64_t top_k, uint64_t token_hash,
                 std::vector<int32_t>* out) {
  const int64_t experts = static_cast<int64_t>(weights.size());
  std::vector<double> w = weights;
  std::vector<char> drawn(weights.size(), 0);
  int64_t positive = 0;
  for (double x : w) positive += x > 0 ? 1 : 0;
  double total = std::accumulate(w.begin(), w.end(), 0.0);
  out->assign(static_cast<size_t>(top_k), 0);
  for (int64_t k = 0; k < top_k; ++k) {
    int64_t e = 0;
    if (positive > 0) {
      // Pick by cumulative weight, then remove.
      double u = UnitInterval(Mix64(token_hash + 2 * k + 1)) * total;
      while (e < experts - 1 && (w[e] == 0 || u >= w[e])) {
        u -= w[e];
        ++e;
      }
      while (w[e] == 0) --e;  // rounding ran past the last positive weight
      --positive;
    } else {
      // Every weight left underflowed (a skew past double's range): the
      // heaviest undrawn expert, the lowest-numbered.
      while (drawn[e]) ++e;
    }
    total -= w[e];
    w[e] = 0;
    drawn[e] = 1;
    (*out)[k] = static_cast<int32_t>(e);
  }
}

}  // namespace foldplan::validate
