#include "planner/pipeline_split.h"

#include <cstdint>
#include <cstdlib>
#include <string>

namespace foldplan {
namespace {

// Spreads per-pipeline-rank counts over vpp chunks each.
std::vector<int> ToVirtualStages(const std::vector<int>& per_rank, int vpp) {
  const int pp = static_cast<int>(per_rank.size());
  std::vector<int> stages(static_cast<size_t>(pp * vpp));
  for (int v = 0; v < vpp; ++v) {
    for (int p = 0; p < pp; ++p) stages[static_cast<size_t>(v * pp + p)] = per_rank[p] / vpp;
  }
  return stages;
}

std::string Describe(int layers, int pp, int vpp) {
  return std::to_string(layers) + " layers over pp=" + std::to_string(pp) +
         (vpp > 1 ? " x vpp=" + std::to_string(vpp) : "");
}

}  // namespace

Result<std::vector<int>> SplitLayers(int layers, int pp, int vpp) {
  if (layers < 1 || pp < 1 || vpp < 1) return Status::Error("SplitLayers: bad arguments");
  const int64_t stages = int64_t{pp} * vpp;  // 64 bits: a caller's pp and vpp need not be a layout's
  if (layers % stages == 0) {
    return std::vector<int>(static_cast<size_t>(stages), static_cast<int>(layers / stages));
  }
  if (pp == 1) {
    return Status::Error(Describe(layers, pp, vpp) + ": one stage's layers must divide by vpp");
  }
  // Try heaviest-stage sizes m from the ideal upwards; middle stages take m,
  // first F and last L take the rest, each in [vpp, m] and divisible by vpp.
  const int middle_stages = pp - 2;
  for (int m = (layers + pp - 1) / pp; m <= layers; ++m) {
    if (pp > 2 && m % vpp != 0) continue;
    const int rest = layers - m * middle_stages;
    if (rest < 2 * vpp) break;  // larger m only leaves less
    int best_first = -1;
    for (int first = vpp; first <= m && first < rest; first += vpp) {
      const int last = rest - first;
      if (last < vpp || last > m || last % vpp != 0 || last > first) continue;
      if (best_first < 0 || std::abs(first - last) < std::abs(best_first - (rest - best_first))) {
        best_first = first;
      }
    }
    if (best_first < 0) continue;
    std::vector<int> per_rank(static_cast<size_t>(pp), m);
    per_rank.front() = best_first;
    per_rank.back() = rest - best_first;
    return ToVirtualStages(per_rank, vpp);
  }
  return Status::Error(Describe(layers, pp, vpp) +
                       ": no Megatron split (first/last stages uneven, middle stages equal, "
                       "each stage divisible by vpp); give stages= explicitly");
}

}  // namespace foldplan
