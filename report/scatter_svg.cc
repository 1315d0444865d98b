#include "report/scatter_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "report/plot_axes.h"
#include "report/svg.h"

namespace foldplan {

std::vector<size_t> ParetoFront(const std::vector<std::pair<double, double>>& points) {
  std::vector<size_t> order(points.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&points](size_t a, size_t b) {
    return points[a] != points[b] ? points[a] < points[b] : a < b;
  });
  // Sweep in x order: a point is on the front when its y is below every y
  // seen so far (those have x <= its x), or equals the last front point.
  std::vector<size_t> front;
  for (size_t i : order) {
    if (front.empty() || points[i].second < points[front.back()].second || points[i] == points[front.back()]) {
      front.push_back(i);
    }
  }
  return front;
}

namespace {

std::string GibTick(double v) { return Num(v, 1); }
std::string SecondsTick(double v) { return SecondsText(v); }

std::string PointTitle(size_t i, const PlanCandidate& c, bool front) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "\nstep %.4g s, peak %.2f GiB, %.0f tokens/s, MFU %.1f%%", c.step_time_s, c.peak_gib,
                c.tokens_per_s, c.mfu * 100);
  std::string t = "#" + std::to_string(i + 1) + (i == 0 ? " (chosen)" : "") + ": " + c.layout + buf;
  if (front) t += "\non the Pareto front";
  return t;
}

}  // namespace

std::string CandidateScatterSvg(const std::vector<PlanCandidate>& candidates) {
  constexpr double kW = 720, kH = 420, kLeft = 70, kRight = 20, kTop = 16, kBottom = 48;
  std::vector<std::pair<double, double>> points;
  double x_lo = 1e300, x_hi = -1e300, y_lo = 1e300, y_hi = -1e300;
  for (const PlanCandidate& c : candidates) {
    points.push_back({c.peak_gib, c.step_time_s});
    x_lo = std::min(x_lo, c.peak_gib);
    x_hi = std::max(x_hi, c.peak_gib);
    y_lo = std::min(y_lo, c.step_time_s);
    y_hi = std::max(y_hi, c.step_time_s);
  }
  PadRange(&x_lo, &x_hi);
  PadRange(&y_lo, &y_hi);
  const Axis x{x_lo, x_hi, kLeft, kW - kRight, false};
  const Axis y{y_lo, y_hi, kH - kBottom, kTop, false};
  Svg svg(kW, kH, "scatter");
  DrawAxes(svg, x, y, "peak memory per GPU (GiB)", "step time", GibTick, SecondsTick);
  const std::vector<size_t> front = ParetoFront(points);
  std::vector<bool> on_front(points.size(), false);
  for (size_t i : front) on_front[i] = true;
  // The front as a staircase: down at each front point, right to the next.
  std::string stair;
  for (size_t k = 0; k < front.size(); ++k) {
    const double px = x.Map(points[front[k]].first), py = y.Map(points[front[k]].second);
    if (k > 0) stair += Num(px) + "," + Num(y.Map(points[front[k - 1]].second)) + " ";
    stair += Num(px) + "," + Num(py) + " ";
  }
  if (front.size() > 1) svg.Polyline(stair, "#e15759", 1.5, "stroke-dasharray=\"5 3\" class=\"front\"");
  // Back to front, so the chosen layout is drawn last, on top.
  for (size_t k = points.size(); k-- > 0;) {
    const double px = x.Map(points[k].first), py = y.Map(points[k].second);
    const std::string attrs = "data-candidate=\"" + std::to_string(k) + "\"" + (on_front[k] ? " data-front=\"1\"" : "") +
                              (k == 0 ? " stroke=\"#111\" stroke-width=\"2\"" : " stroke=\"#fff\" stroke-width=\"1\"");
    const std::string fill = k == 0 ? "#f28e2b" : on_front[k] ? "#e15759" : "#4e79a7";
    svg.Circle(px, py, k == 0 ? 8 : 5.5, fill, PointTitle(k, candidates[k], on_front[k]), attrs);
  }
  // The legend, top right.
  const double lx = kW - kRight - 180, ly = kTop + 14;
  svg.Rect(lx - 8, ly - 12, 184, 62, "#ffffff", "", "stroke=\"#d5dbe4\" opacity=\"0.92\"");
  svg.Circle(lx, ly - 3, 7, "#f28e2b", "", "stroke=\"#111\" stroke-width=\"2\"");
  svg.Text(lx + 12, ly + 1, "chosen (#1)", "start", 11);
  svg.Circle(lx, ly + 15, 5, "#e15759");
  svg.Text(lx + 12, ly + 19, "Pareto front (time, memory)", "start", 11);
  svg.Circle(lx, ly + 33, 5, "#4e79a7");
  svg.Text(lx + 12, ly + 37, "other candidates", "start", 11);
  return svg.Finish();
}

std::string PredictedMeasuredSvg(const std::vector<PredictedMeasuredPoint>& points) {
  constexpr double kW = 520, kH = 440, kLeft = 70, kRight = 20, kTop = 16, kBottom = 48;
  double lo = 1e300, hi = 0;
  for (const PredictedMeasuredPoint& p : points) {
    for (double v : {p.measured_s, p.predicted_s}) {
      if (v > 0) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  }
  if (!(hi > 0)) lo = 1e-6, hi = 1e-3;
  lo /= 1.5;
  hi *= 1.5;
  const Axis x{lo, hi, kLeft, kW - kRight, true};
  const Axis y{lo, hi, kH - kBottom, kTop, true};
  Svg svg(kW, kH, "scatter");
  DrawAxes(svg, x, y, "measured (foldbench median)", "predicted (cost model)", SecondsTick, SecondsTick);
  svg.Line(x.Map(lo), y.Map(lo), x.Map(hi), y.Map(hi), "#59a14f", 1.5, "stroke-dasharray=\"5 3\"");
  svg.Text(x.Map(hi) - 6, y.Map(hi) + 14, "predicted = measured", "end", 10.5);
  for (size_t i = 0; i < points.size(); ++i) {
    const PredictedMeasuredPoint& p = points[i];
    if (!(p.measured_s > 0) || !(p.predicted_s > 0)) continue;
    svg.Circle(x.Map(p.measured_s), y.Map(p.predicted_s), 4.5, p.in_summary ? "#4e79a7" : "#bab0ac", p.title,
               "data-case=\"" + std::to_string(i) + "\" stroke=\"#fff\" stroke-width=\"0.8\"");
  }
  return svg.Finish();
}

}  // namespace foldplan
