#include "report/sim_svg.h"

#include <algorithm>
#include <map>

#include "report/colors.h"
#include "report/plot_axes.h"
#include "report/svg.h"

namespace foldplan {

namespace {

std::string GibTick(double v) { return Num(v, 1); }

const char* PassColor(const std::string& pass) {
  if (pass == "F") return "#4e79a7";
  if (pass == "B") return "#f28e2b";
  if (pass == "W") return "#59a14f";
  return "#9c755f";  // step: data-parallel and optimizer work
}

}  // namespace

SimPicture CriticalPathSvg(const SimulationSummary& sim) {
  SimPicture pic;
  std::map<int, int> row_of;
  const size_t n = std::min(sim.critical_path.size(), kMaxSegments);
  for (size_t i = 0; i < n; ++i) row_of.emplace(sim.critical_path[i].rank, 0);
  int row = 0;
  for (auto& entry : row_of) entry.second = row++;
  constexpr double kW = 1100, kLeft = 80, kRight = 20, kTop = 10, kRow = 22, kBottom = 44;
  const double height = kTop + std::max(1, row) * kRow + kBottom;
  double end = sim.simulated_step_s;
  for (size_t i = 0; i < n; ++i) end = std::max(end, sim.critical_path[i].start_s + sim.critical_path[i].duration_s);
  const Axis x{0, end > 0 ? end : 1, kLeft, kW - kRight, false};
  Svg svg(kW, height, "timeline");
  const double bottom = kTop + std::max(1, row) * kRow;
  svg.Rect(kLeft, kTop, kW - kRight - kLeft, bottom - kTop, "#fbfcfd", "", "stroke=\"#9aa7ba\"");
  const TimeAxisUnit unit = TimeUnitFor(0, x.hi, 8);
  for (double t : NiceTicks(0, x.hi, 8)) {
    svg.Line(x.Map(t), kTop, x.Map(t), bottom, "#e3e7ee");
    svg.Text(x.Map(t), bottom + 14, unit.Label(t), "middle", 10, "class=\"tick\"");
  }
  svg.Text((kLeft + kW - kRight) / 2, bottom + 32, "time in the step (" + unit.name + "; critical path, simulated)",
           "middle", 11.5, "class=\"axis-title\"");
  for (const auto& entry : row_of) {
    svg.Text(kLeft - 6, kTop + entry.second * kRow + kRow / 2 + 4, "rank " + std::to_string(entry.first), "end", 10.5);
  }
  for (size_t i = 0; i < n; ++i) {
    const SimSegment& s = sim.critical_path[i];
    const double x0 = x.Map(s.start_s), x1 = x.Map(s.start_s + s.duration_s);
    std::string title = "rank " + std::to_string(s.rank) + ", pass " + s.pass +
                        (s.microbatch >= 0 ? ", micro-batch " + std::to_string(s.microbatch) : "") + "\nstart " +
                        SecondsText(s.start_s) + ", " + SecondsText(s.duration_s);
    for (const auto& kind : s.by_kind_s) title += "\n" + kind.first + " " + SecondsText(kind.second);
    svg.Rect(x0, kTop + row_of[s.rank] * kRow + 3, std::max(0.8, x1 - x0), kRow - 6, PassColor(s.pass), title,
             "data-segment=\"" + std::to_string(i) + "\"");
  }
  if (sim.critical_path_segments > n) {
    pic.note = "the first " + std::to_string(n) + " of " + std::to_string(sim.critical_path_segments) +
               " critical-path segments drawn";
  }
  pic.svg = svg.Finish();
  return pic;
}

SimPicture MemoryTimelineSvg(const SimulationSummary& sim) {
  SimPicture pic;
  constexpr double kW = 1100, kH = 360, kLeft = 70, kRight = 130, kTop = 12, kBottom = 46;
  constexpr double kGib = 1024.0 * 1024.0 * 1024.0;
  const size_t ranks = std::min(sim.memory.size(), kMaxMemoryRanks);
  double t_hi = sim.simulated_step_s, b_hi = 0;
  for (size_t r = 0; r < ranks; ++r) {
    const SimMemory& m = sim.memory[r];
    b_hi = std::max({b_hi, m.peak_bytes, m.model_peak_bytes});
    for (const auto& p : m.points) {
      t_hi = std::max(t_hi, p.first);
      b_hi = std::max(b_hi, p.second);
    }
  }
  // The GPU's HBM drawn when the file gives it (and the axis reaches it).
  const double hbm_bytes = sim.hbm_gib * kGib;
  b_hi = std::max(b_hi, hbm_bytes);
  const Axis x{0, t_hi > 0 ? t_hi : 1, kLeft, kW - kRight, false};
  const Axis y{0, b_hi > 0 ? b_hi / kGib * 1.08 : 1, kH - kBottom, kTop, false};
  Svg svg(kW, kH, "memory");
  const TimeAxisUnit unit = TimeUnitFor(x.lo, x.hi);
  DrawAxes(svg, x, y, "time in the step (" + unit.name + ", simulated)", "memory per GPU (GiB)",
           [&unit](double t) { return unit.Label(t); }, GibTick);
  if (sim.hbm_gib > 0) {
    const double hy = y.Map(sim.hbm_gib);
    svg.Line(kLeft, hy, kW - kRight, hy, "#b3261e", 1.5, "stroke-dasharray=\"6 3\" class=\"hbm\"");
    svg.Text(kW - kRight - 4, hy - 4, "HBM " + Num(sim.hbm_gib, 1) + " GiB", "end", 10.5, "class=\"hbm-label\"");
  }
  bool thinned = false;
  for (size_t r = 0; r < ranks; ++r) {
    const SimMemory& m = sim.memory[r];
    const std::string color = SeriesColor(static_cast<int>(r));
    // At most kMaxMemoryPoints: each bucket of points keeps its highest.
    const size_t stride = (m.points.size() + kMaxMemoryPoints - 1) / kMaxMemoryPoints;
    if (stride > 1) thinned = true;
    std::string line;
    double last_y = y.Map(0);
    for (size_t i = 0; i < m.points.size(); i += std::max<size_t>(1, stride)) {
      double t = m.points[i].first, b = m.points[i].second;
      for (size_t j = i + 1; j < std::min(m.points.size(), i + stride); ++j) b = std::max(b, m.points[j].second);
      const double px = x.Map(t), py = y.Map(b / kGib);
      if (!line.empty()) line += Num(px) + "," + Num(last_y) + " ";
      line += Num(px) + "," + Num(py) + " ";
      last_y = py;
    }
    if (!line.empty()) line += Num(x.Map(t_hi)) + "," + Num(last_y);
    svg.Raw("<g data-memory-rank=\"" + std::to_string(m.rank) + "\"><title>" +
            EscapeXml("rank " + std::to_string(m.rank) + " (pipeline rank " + std::to_string(m.pipeline_rank) +
                      "): simulated peak " + Num(m.peak_bytes / kGib, 2) + " GiB, memory model " +
                      Num(m.model_peak_bytes / kGib, 2) + " GiB") +
            "</title>");
    svg.Polyline(line, color, 1.6);
    const double model_y = y.Map(m.model_peak_bytes / kGib);
    svg.Line(kLeft, model_y, kW - kRight, model_y, color, 1, "stroke-dasharray=\"2 4\" opacity=\"0.8\"");
    svg.Raw("</g>");
    const double ly = kTop + 12 + static_cast<double>(r) * 16;
    svg.Rect(kW - kRight + 12, ly - 9, 14, 4, color);
    svg.Text(kW - kRight + 32, ly - 4, "rank " + std::to_string(m.rank), "start", 10.5);
  }
  svg.Text(kW - kRight + 12, kTop + 22 + static_cast<double>(ranks) * 16, "dashed: memory model", "start", 9.5);
  pic.svg = svg.Finish();
  if (sim.memory_ranks > ranks) {
    pic.note = "the first " + std::to_string(ranks) + " of " + std::to_string(sim.memory_ranks) + " ranks drawn";
  }
  if (thinned) pic.note += std::string(pic.note.empty() ? "" : "; ") + "long timelines thinned, peaks kept";
  return pic;
}

}  // namespace foldplan
