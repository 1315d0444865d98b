#include "report/scatter_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/text_table.h"
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

std::string PointTitle(size_t i, const PlanCandidate& c, bool front, const std::string& twins) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "\nstep %.4g s, peak %.2f GiB, ", c.step_time_s, c.peak_gib);
  std::string t = "#" + std::to_string(i + 1) + (i == 0 ? " (chosen)" : "") + ": " + c.layout + buf +
                  TokensText(c.tokens_per_s) + " tokens/s, MFU " + Num(c.mfu * 100, 1) + "%";
  if (c.equivalent_layouts > 1) t += "\nstands for " + WithCommas(c.equivalent_layouts) + " layouts of equal score";
  if (front) t += "\non the Pareto front";
  if (!twins.empty()) t += "\nsame step time and memory as " + twins;
  return t;
}

}  // namespace

std::string TokensText(double tokens_per_s) {
  if (!(tokens_per_s < 1e18)) return Num(tokens_per_s, 0);  // past what an integer holds (and NaN): as is
  return WithCommas(static_cast<unsigned long long>(std::llround(std::max(0.0, tokens_per_s))));
}

std::string CandidateScatterSvg(const std::vector<PlanCandidate>& candidates, double memory_limit_gib) {
  constexpr double kW = 720, kH = 436, kLeft = 70, kRight = 20, kTop = 40, kBottom = 48;
  std::vector<std::pair<double, double>> points;
  double x_lo = 1e300, x_hi = -1e300, y_lo = 1e300, y_hi = -1e300;
  for (const PlanCandidate& c : candidates) {
    points.push_back({c.peak_gib, c.step_time_s});
    x_lo = std::min(x_lo, c.peak_gib);
    x_hi = std::max(x_hi, c.peak_gib);
    y_lo = std::min(y_lo, c.step_time_s);
    y_hi = std::max(y_hi, c.step_time_s);
  }
  // The memory axis reaches the GPU's HBM (and the plan's limit), drawn as lines.
  const double hbm_gib = candidates.empty() ? 0 : candidates.front().hbm_gib;
  x_hi = std::max({x_hi, hbm_gib, memory_limit_gib});
  PadRange(&x_lo, &x_hi);
  PadRange(&y_lo, &y_hi);
  const Axis x{x_lo, x_hi, kLeft, kW - kRight, false};
  const Axis y{y_lo, y_hi, kH - kBottom, kTop, false};
  Svg svg(kW, kH, "scatter");
  const TimeAxisUnit unit = TimeUnitFor(y.lo, y.hi);
  DrawAxes(svg, x, y, "peak memory per GPU (GiB)", "step time (" + unit.name + ")", GibTick,
           [&unit](double t) { return unit.Label(t); });
  if (hbm_gib > 0) {
    const double px = x.Map(hbm_gib);
    svg.Line(px, kTop, px, kH - kBottom, "#b3261e", 1.5, "stroke-dasharray=\"6 3\" class=\"hbm\"");
    svg.Text(px - 4, kTop - 6, "HBM " + Num(hbm_gib, 1) + " GiB", "end", 10.5, "class=\"hbm-label\"");
  }
  if (memory_limit_gib > 0 && memory_limit_gib < hbm_gib) {
    const double px = x.Map(memory_limit_gib);
    svg.Line(px, kTop, px, kH - kBottom, "#8a4b00", 1, "stroke-dasharray=\"2 3\" class=\"memory-limit\"");
  }
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
  // Twins (equal step time and memory) share a point: one label names them all.
  std::map<std::pair<double, double>, std::vector<size_t>> same;
  for (size_t k = 0; k < points.size(); ++k) same[points[k]].push_back(k);
  // Back to front, so the chosen layout is drawn last, on top.
  for (size_t k = points.size(); k-- > 0;) {
    const double px = x.Map(points[k].first), py = y.Map(points[k].second);
    const std::string attrs = "data-candidate=\"" + std::to_string(k + 1) + "\"" +
                              (on_front[k] ? " data-front=\"1\"" : "") +
                              (k == 0 ? " stroke=\"#111\" stroke-width=\"2\"" : " stroke=\"#fff\" stroke-width=\"1\"");
    const std::string fill = k == 0 ? "#f28e2b" : on_front[k] ? "#e15759" : "#4e79a7";
    std::string twins;
    for (size_t j : same[points[k]]) {
      if (j != k) twins += (twins.empty() ? "#" : ", #") + std::to_string(j + 1);
    }
    svg.Circle(px, py, k == 0 ? 8 : 5.5, fill, PointTitle(k, candidates[k], on_front[k], twins), attrs);
  }
  // The numbers, as in the table: one label per point, twins joined.
  for (const auto& [point, members] : same) {
    if (members.front() >= kNumberedCandidates) continue;
    std::string label;
    for (size_t m = 0; m < members.size() && members[m] < kNumberedCandidates; ++m) {
      if (m == 3) {
        label += "+" + std::to_string(members.size() - 3);
        break;
      }
      label += (m ? "," : "") + std::to_string(members[m] + 1);
    }
    svg.Text(x.Map(point.first) + 8, y.Map(point.second) - 6, label, "start", 10,
             "class=\"point-label\" data-label=\"" + EscapeXml(label) + "\"");
  }
  // The legend, one row above the plot (inside it, it would hide points).
  const double ly = 14;
  svg.Circle(kLeft + 6, ly - 4, 7, "#f28e2b", "", "stroke=\"#111\" stroke-width=\"2\"");
  svg.Text(kLeft + 18, ly, "chosen (#1)", "start", 11);
  svg.Circle(kLeft + 110, ly - 4, 5, "#e15759");
  svg.Text(kLeft + 120, ly, "Pareto front (time, memory)", "start", 11);
  svg.Circle(kLeft + 290, ly - 4, 5, "#4e79a7");
  svg.Text(kLeft + 300, ly, "other candidates", "start", 11);
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
