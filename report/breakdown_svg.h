// The best layout's step and memory as stacked bars. The step's parts come
// from the plan file's candidate (costmodel/evaluate.h StepBreakdown,
// CommKindCost):
//   step = pipeline + data-parallel exposed + optimizer          (evaluate.cc)
//   pipeline = m x stage time + bubble                           (schedule.h)
// and the slowest stage's m x stage time splits into its compute
// (m x stage_compute_s), each communication kind's exposed seconds (the
// candidate's comm[kind].exposed_s, already per step) and what is left
// ("other pipeline time": stage boundaries or schedule effects the kinds do
// not carry; shown only when not zero). The parts sum to the step time
// exactly. Memory: the candidate's named terms (costmodel/memory.h), the
// zero ones dropped, summing to peak_gib. Each part's colour is fixed by
// its name (report/colors.h), the same in every report.
#pragma once

#include <string>
#include <vector>

#include "report/report_inputs.h"

namespace foldplan {

struct BarSegment {
  std::string name;
  double value = 0;     // seconds or GiB
  std::string detail;   // hover text after the name and value
  std::string color;    // fill (report/colors.h: fixed per name)
};

// The name of the data-parallel entry evaluate.cc adds to the comm list.
inline constexpr const char* kDataParallelExposedKind = "data-parallel (exposed part)";

std::vector<BarSegment> StepSegments(const PlanCandidate& c);
std::vector<BarSegment> MemorySegments(const PlanCandidate& c);

// A horizontal stacked bar of `segments` (width proportional to value) with
// a legend of names and values; `format` prints a value; `capacity` > 0
// draws a marker there (HBM) and scales the bar to the larger of it and the
// sum. Segments carry data-segment="name" and data-value="v".
std::string StackedBarSvg(const std::vector<BarSegment>& segments, std::string (*format)(double), double capacity,
                          const std::string& capacity_label);

std::string GibText(double gib);  // "12.3 GiB"

}  // namespace foldplan
