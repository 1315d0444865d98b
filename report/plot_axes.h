// Axes for the report's charts: a value range mapped to pixels, linear or
// logarithmic, with "nice" ticks (1, 2, 5 times a power of ten; powers of
// ten on a log axis), drawn with their labels into an Svg.
#pragma once

#include <string>
#include <vector>

#include "report/svg.h"

namespace foldplan {

struct Axis {
  double lo = 0, hi = 1;          // values at the ends (lo > 0 when log)
  double px_lo = 0, px_hi = 100;  // their pixels
  bool log = false;
  double Map(double v) const;     // value -> pixel, clamped to the ends
};

// Ticks covering [lo, hi]: about `target` of them, at 1/2/5 x 10^k steps.
std::vector<double> NiceTicks(double lo, double hi, int target = 6);
// The range [lo, hi] padded by `fraction` of its width (a zero-width range
// widened to +-10%, or +-1 around 0), for a linear axis.
void PadRange(double* lo, double* hi, double fraction = 0.06);

// Frame, grid, ticks and axis titles of a chart whose plot area is the
// axes' pixel ranges; `x_label` and `y_label` format a tick value.
void DrawAxes(Svg& svg, const Axis& x, const Axis& y, const std::string& x_title, const std::string& y_title,
              std::string (*x_label)(double), std::string (*y_label)(double));

}  // namespace foldplan
