// Scatter plots of the report: the plan's candidates (step time against
// peak memory, the Pareto front and the chosen layout marked) and
// foldbench's measurements against the cost model's predictions (log-log,
// the line predicted = measured). Hover text (<title>) names each point.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "report/report_inputs.h"

namespace foldplan {

// The indices of the points no other point dominates, minimising both
// coordinates: i is on the front when no j has x_j <= x_i and y_j <= y_i
// with one of them strict. Equal points are all on it. Sorted by x, then y.
std::vector<size_t> ParetoFront(const std::vector<std::pair<double, double>>& points);

// x = peak memory (GiB), y = step time (s); candidate 0 is the chosen one.
// Points carry data-candidate="i" (and data-front="1" on the front).
std::string CandidateScatterSvg(const std::vector<PlanCandidate>& candidates);

struct PredictedMeasuredPoint {
  double measured_s = 0, predicted_s = 0;
  std::string title;
  bool in_summary = true;
};
std::string PredictedMeasuredSvg(const std::vector<PredictedMeasuredPoint>& points);

}  // namespace foldplan
