// Axes for the report's charts: a value range mapped to pixels, linear or
// logarithmic, with "nice" ticks (1, 2, 5 times a power of ten; powers of
// ten on a log axis), drawn with their labels into an Svg.
#pragma once

#include <functional>
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

// A linear time axis in one unit, chosen from the range: s when its far
// end is at least a second, else ms when at least a millisecond, else us;
// ticks print as plain numbers with the decimals their step needs, and the
// unit goes in the axis title, so "0" never sits beside "1.5 s" as "0 us".
struct TimeAxisUnit {
  std::string name = "s";  // s, ms or us
  double seconds = 1;      // one unit in seconds
  int decimals = 0;
  std::string Label(double seconds_value) const;
};
// For ticks over [lo, hi] seconds, about `target` of them (NiceTicks).
TimeAxisUnit TimeUnitFor(double lo, double hi, int target = 6);

using TickLabel = std::function<std::string(double)>;

// Frame, grid, ticks and axis titles of a chart whose plot area is the
// axes' pixel ranges; `x_label` and `y_label` format a tick value.
void DrawAxes(Svg& svg, const Axis& x, const Axis& y, const std::string& x_title, const std::string& y_title,
              const TickLabel& x_label, const TickLabel& y_label);

}  // namespace foldplan
