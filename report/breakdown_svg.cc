#include "report/breakdown_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "report/colors.h"
#include "report/svg.h"

namespace foldplan {

std::string GibText(double gib) {
  char buf[32];
  std::snprintf(buf, sizeof buf, gib >= 10 ? "%.1f GiB" : "%.2f GiB", gib);
  return buf;
}

std::vector<BarSegment> StepSegments(const PlanCandidate& c) {
  std::vector<BarSegment> out;
  const double m = static_cast<double>(c.microbatches);
  const double compute = m * c.stage_compute_s;
  out.push_back({"compute", compute,
                 std::to_string(c.microbatches) + " micro-batches x " + SecondsText(c.stage_compute_s) +
                     " on the slowest stage"});
  double exposed = 0;
  for (const CommKindSeconds& k : c.comm) {
    if (k.name == kDataParallelExposedKind || k.exposed_s <= 0) continue;
    out.push_back({"exposed " + k.name, k.exposed_s, "of " + SecondsText(k.total_s) + " in all; the rest hidden"});
    exposed += k.exposed_s;
  }
  const double host = m * c.stage_host_exposed_s;
  if (host > 0) {
    out.push_back({"exposed host", host,
                   std::to_string(c.microbatches) + " micro-batches x " + SecondsText(c.stage_host_exposed_s) +
                       ": launches beyond the GPU's work, and its syncs"});
  }
  // What the stage time holds beyond compute and the kinds' exposed seconds.
  const double other = c.pipeline_s - c.bubble_s - compute - exposed - host;
  if (std::fabs(other) > 1e-9 * std::max(1.0, c.step_time_s)) {
    out.push_back({"other pipeline time", other, "m x stage time - compute - exposed communication"});
  }
  out.push_back({"pipeline bubble", c.bubble_s, "fill and drain of the schedule"});
  out.push_back({"data-parallel exposed", c.dp_exposed_s, "gradient reduce-scatter / parameter all-gather not hidden"});
  out.push_back({"optimizer", c.optimizer_s, "the optimizer step of the slowest stage"});
  if (c.host_step_s > 0) out.push_back({"host syncs", c.host_step_s, "the gradient norm and the loss report"});
  // The last part absorbs the rounding so that the parts sum to the step.
  double sum = 0;
  for (const BarSegment& s : out) sum += s.value;
  out.back().value += c.step_time_s - sum;
  for (BarSegment& s : out) s.color = StepPartColor(s.name);
  return out;
}

std::vector<BarSegment> MemorySegments(const PlanCandidate& c) {
  std::vector<BarSegment> out;
  for (const MemoryTermGib& t : c.memory_terms) {
    if (t.gib > 0) out.push_back({t.name, t.gib, t.note, MemoryTermColor(t.name)});
  }
  return out;
}

std::string StackedBarSvg(const std::vector<BarSegment>& segments, std::string (*format)(double), double capacity,
                          const std::string& capacity_label) {
  constexpr double kLeft = 8, kBarWidth = 1000, kBarTop = 22, kBarHeight = 34, kRow = 18, kCols = 3;
  double sum = 0;
  for (const BarSegment& s : segments) sum += std::max(0.0, s.value);
  const double scale_to = std::max(sum, capacity);
  const int rows = static_cast<int>((segments.size() + kCols - 1) / kCols);
  const double legend_top = kBarTop + kBarHeight + 30;
  Svg svg(kLeft * 2 + kBarWidth + 60, legend_top + rows * kRow + 6, "bar");
  svg.Text(kLeft, 14, "total " + format(sum), "start", 12, "class=\"bar-total\"");
  double x = kLeft;
  for (size_t i = 0; i < segments.size(); ++i) {
    const BarSegment& s = segments[i];
    const double w = scale_to > 0 ? std::max(0.0, s.value) / scale_to * kBarWidth : 0;
    const std::string pct = sum > 0 ? " (" + Num(100 * s.value / sum, 1) + "%)" : "";
    svg.Rect(x, kBarTop, w, kBarHeight, s.color,
             s.name + ": " + format(s.value) + pct + (s.detail.empty() ? "" : "\n" + s.detail),
             "data-segment=\"" + EscapeXml(s.name) + "\" data-value=\"" + Num(s.value, 9) + "\"");
    if (w > 70) {
      svg.Text(x + w / 2, kBarTop + kBarHeight / 2 + 4, s.name, "middle", 10.5,
               "class=\"seg-label\" style=\"fill:" + TextColorOn(s.color) + "\"");
    }
    x += w;
  }
  if (capacity > 0) {
    const double cx = kLeft + capacity / scale_to * kBarWidth;
    svg.Line(cx, kBarTop - 6, cx, kBarTop + kBarHeight + 6, "#222", 2, "stroke-dasharray=\"4 3\"");
    svg.Text(cx, kBarTop + kBarHeight + 18, capacity_label, "middle", 10.5);
  }
  for (size_t i = 0; i < segments.size(); ++i) {
    const double lx = kLeft + static_cast<double>(i % static_cast<size_t>(kCols)) * (kBarWidth / kCols);
    const double ly = legend_top + static_cast<double>(i / static_cast<size_t>(kCols)) * kRow;
    svg.Rect(lx, ly - 10, 12, 12, segments[i].color);
    svg.Text(lx + 17, ly, segments[i].name + "  " + format(segments[i].value), "start", 11);
  }
  return svg.Finish();
}

}  // namespace foldplan
