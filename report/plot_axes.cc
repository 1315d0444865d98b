#include "report/plot_axes.h"

#include <algorithm>
#include <cmath>

namespace foldplan {

double Axis::Map(double v) const {
  double a = lo, b = hi;
  if (log) {
    v = std::log10(std::max(v, 1e-300));
    a = std::log10(lo);
    b = std::log10(hi);
  }
  const double t = b > a ? std::clamp((v - a) / (b - a), 0.0, 1.0) : 0.5;
  return px_lo + t * (px_hi - px_lo);
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return {lo};
  const double raw = (hi - lo) / std::max(target, 1);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  double step = p;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * p;
    if (step >= raw) break;
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  }
  return ticks;
}

void PadRange(double* lo, double* hi, double fraction) {
  if (*hi <= *lo) {
    const double d = *lo == 0 ? 1 : std::fabs(*lo) * 0.1;
    *lo -= d;
    *hi += d;
    return;
  }
  const double d = (*hi - *lo) * fraction;
  *lo -= d;
  *hi += d;
}

namespace {
std::vector<double> LogTicks(double lo, double hi) {
  std::vector<double> ticks;
  for (double e = std::ceil(std::log10(lo) - 1e-9); e <= std::log10(hi) + 1e-9; e += 1) ticks.push_back(std::pow(10.0, e));
  if (ticks.size() < 2) {  // less than a decade: 1-2-5 inside it
    ticks.clear();
    for (double e = std::floor(std::log10(lo)); e <= std::ceil(std::log10(hi)); e += 1) {
      for (double m : {1.0, 2.0, 5.0}) {
        const double t = m * std::pow(10.0, e);
        if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) ticks.push_back(t);
      }
    }
  }
  return ticks;
}
}  // namespace

std::string TimeAxisUnit::Label(double seconds_value) const {
  const double v = seconds_value / seconds;
  return Num(std::fabs(v) < 0.5 * std::pow(10.0, -decimals) ? 0 : v, decimals);
}

TimeAxisUnit TimeUnitFor(double lo, double hi, int target) {
  TimeAxisUnit u;
  const double far = std::max(std::fabs(lo), std::fabs(hi));
  if (far < 1e-3) {
    u.name = "us", u.seconds = 1e-6;
  } else if (far < 1) {
    u.name = "ms", u.seconds = 1e-3;
  }
  const std::vector<double> ticks = NiceTicks(lo, hi, target);
  if (ticks.size() >= 2) {
    const double step = (ticks[1] - ticks[0]) / u.seconds;
    u.decimals = std::clamp(static_cast<int>(std::ceil(-std::log10(step) - 1e-9)), 0, 6);
  }
  return u;
}

void DrawAxes(Svg& svg, const Axis& x, const Axis& y, const std::string& x_title, const std::string& y_title,
              const TickLabel& x_label, const TickLabel& y_label) {
  const double left = x.px_lo, right = x.px_hi, bottom = y.px_lo, top = y.px_hi;
  svg.Rect(left, top, right - left, bottom - top, "#ffffff", "", "stroke=\"#9aa7ba\"");
  for (double t : x.log ? LogTicks(x.lo, x.hi) : NiceTicks(x.lo, x.hi)) {
    const double px = x.Map(t);
    svg.Line(px, top, px, bottom, "#e3e7ee");
    svg.Text(px, bottom + 14, x_label(t), "middle", 10, "class=\"tick\"");
  }
  for (double t : y.log ? LogTicks(y.lo, y.hi) : NiceTicks(y.lo, y.hi)) {
    const double py = y.Map(t);
    svg.Line(left, py, right, py, "#e3e7ee");
    svg.Text(left - 5, py + 3.5, y_label(t), "end", 10, "class=\"tick\"");
  }
  svg.Text((left + right) / 2, bottom + 32, x_title, "middle", 11.5, "class=\"axis-title\"");
  const double cy = (top + bottom) / 2;
  svg.Text(0, 0, y_title, "middle", 11.5,
           "class=\"axis-title\" transform=\"translate(" + Num(left - 48) + "," + Num(cy) + ") rotate(-90)\"");
}

}  // namespace foldplan
