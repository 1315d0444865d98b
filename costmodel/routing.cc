#include "costmodel/routing.h"

#include <algorithm>
#include <cmath>

namespace foldplan {

double ExpertLoadFactor(const JobSpec& job, int ep) {
  if (job.capacity_factor > 0) return job.capacity_factor;
  return ep > 1 ? std::max(1.0, job.routing_imbalance) : 1.0;
}

double HitProbability(int experts, int top_k, double held) {
  if (experts < 1 || top_k < 1 || !(held > 0)) return 0;
  if (held >= experts) return 1;
  // C(E - held, k) / C(E, k) = prod_{i<k} (E - held - i) / (E - i).
  double none = 1;
  for (int i = 0; i < top_k && i < experts; ++i) none *= std::max(0.0, (experts - held - i) / (experts - i));
  return 1 - none;
}

double ExpectedDistinctRanks(int experts, int top_k, int ep) {
  if (ep <= 1 || experts < 1 || top_k < 1) return ep >= 1 ? 1 : 0;
  return ep * HitProbability(experts, top_k, static_cast<double>(experts) / ep);
}

double ApproxDistinctRanks(double ep, double top_k) { return ep * (1 - std::pow(1 - 1 / ep, top_k)); }

}  // namespace foldplan
