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

// Candidates are numbered from 1, #1 the best (the plan file's list order),
// in the table, the picture and `--candidate N`.
// The first kNumberedCandidates points carry their number as a label (the
// candidates the page's table lists); twins (equal time and memory) share
// one label ("3,4").
inline constexpr size_t kNumberedCandidates = 100;

// Every candidate of the plan: x = peak memory (GiB), y = step time;
// candidate #1 is the chosen one. The memory axis reaches the GPU's HBM
// (candidates' hbm_gib), drawn as a line, and the plan's memory limit when
// given (> 0, below HBM). Points carry data-candidate="N" (numbered from 1;
// data-front="1" on the front).
std::string CandidateScatterSvg(const std::vector<PlanCandidate>& candidates, double memory_limit_gib = 0);

// Tokens per second with thousands separators: "1,284,113".
std::string TokensText(double tokens_per_s);

struct PredictedMeasuredPoint {
  double measured_s = 0, predicted_s = 0;
  std::string title;
  bool in_summary = true;
};
std::string PredictedMeasuredSvg(const std::vector<PredictedMeasuredPoint>& points);

}  // namespace foldplan
