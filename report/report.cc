#include "report/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/text_table.h"
#include "costmodel/evaluate.h"
#include "costmodel/measured_op_prediction.h"
#include "costmodel/plan_file.h"
#include "inputs/measurements.h"
#include "planner/layout.h"
#include "report/breakdown_svg.h"
#include "report/rank_map_svg.h"
#include "report/report_inputs.h"
#include "report/scatter_svg.h"
#include "report/sim_svg.h"
#include "report/svg.h"

namespace foldplan {

namespace {

constexpr const char* kStyle = R"css(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;background:#eef1f5;color:#1f2733}
header{background:#23324a;color:#fff;padding:18px 28px}
header h1{margin:0 0 4px;font-size:22px;font-weight:600}
header .layout{font-family:"DejaVu Sans Mono",monospace;font-size:14px;color:#ffd28f}
header .cannot-run{margin-top:8px;padding:4px 8px;border-radius:4px;background:#b3261e;color:#fff;font-size:14px;display:inline-block}
.kpis{display:flex;gap:22px;flex-wrap:wrap;margin-top:10px;font-size:13px;color:#cfd8e6}
.kpis b{display:block;font-size:18px;color:#fff}
main{padding:14px 28px 40px}
section{background:#fff;border-radius:8px;box-shadow:0 1px 3px rgba(0,0,0,.08);padding:14px 18px;margin:14px 0;overflow-x:auto}
section h2{font-size:17px;margin:0 0 6px}
p.caption{font-size:13px;color:#4a5566;margin:4px 0 10px;max-width:1100px}
p.note{font-size:13px;color:#8a4b00;background:#fff4e0;padding:4px 8px;border-radius:4px;display:inline-block}
table{border-collapse:collapse;font-size:12.5px;margin-top:8px}
th,td{padding:3px 10px;border-bottom:1px solid #e3e7ee;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
th{background:#f4f6f9}
code{font-family:"DejaVu Sans Mono",monospace;font-size:12px;overflow-wrap:normal;word-break:normal}
.tok{white-space:nowrap}
svg text{fill:#1f2733}
svg.bar,svg.timeline,svg.memory,svg.scatter,svg.compact{max-width:100%;height:auto}
svg .cell-label{font-family:"DejaVu Sans Mono",monospace;pointer-events:none}
svg .seg-label{fill:#fff;pointer-events:none}
svg .box-label{fill:#4a5566}
svg .tick{fill:#5a6577}
.legend{display:flex;flex-wrap:wrap;gap:6px 14px;font-size:12px;margin:6px 0}
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-2px;margin-right:4px;border:1px solid #7d8797}
.grid2{display:flex;gap:24px;flex-wrap:wrap;align-items:flex-start}
)css";

std::string H(const std::string& s) { return EscapeXml(s); }

// A layout's canonical text, escaped, breakable only after its commas (a
// table cell wraps between "key=value" items, never inside one, not even
// at the hyphens of an order).
std::string LayoutHtml(const std::string& layout) {
  std::string out;
  size_t at = 0;
  while (at < layout.size()) {
    const size_t comma = layout.find(',', at);
    const size_t end = comma == std::string::npos ? layout.size() : comma + 1;
    out += "<span class=\"tok\">" + H(layout.substr(at, end - at)) + "</span>";
    if (end < layout.size()) out += "<wbr>";
    at = end;
  }
  return out;
}

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string Section(const std::string& id, const std::string& title, const std::string& caption,
                    const std::string& body) {
  return "<section id=\"" + id + "\"><h2>" + H(title) + "</h2><p class=\"caption\">" + caption + "</p>" + body +
         "</section>\n";
}

// The plan's layout cannot run as written (an explain --allow-oom plan, or
// one of an illegal layout): said at the top of the page.
std::string CannotRunBanner(const PlanCandidate& best) {
  const std::string problems = VerdictProblems(VerdictOf(best));
  return problems.empty() ? "" : "<div class=\"cannot-run\">cannot run as planned: it " + H(problems) + "</div>";
}

std::string Note(const std::string& text) { return text.empty() ? "" : "<p class=\"note\">" + H(text) + "</p>"; }

std::string RankMapSection(const PlanFileInputs& in, const ReportOptions& o) {
  auto map = BuildRankMap(in.layout, in.cluster, RankMapOptionsFor(&in.model));
  if (!map.ok()) {
    return Section("rank-map", "Rank map", "The best layout's ranks on the cluster.",
                   Note("no rank map: " + map.status().message()));
  }
  const MapColoring coloring = o.color_by ? *o.color_by : DefaultColoring(in.layout);
  const RankMapPicture pic = DrawRankMap(map.value(), in.cluster, coloring, o.max_gpus);
  const int group_size = pic.groups > 0 ? map.value().world() / pic.groups : 0;
  const std::string colour_text =
      coloring.stage ? "its <b>pipeline stage</b> (" + std::to_string(pic.groups) + " stages of " +
                           std::to_string(group_size) + " ranks: the ranks holding the same layers)"
      : coloring.kind == GroupKind::kPp
          ? "its <b>pp</b> group (" + std::to_string(pic.groups) + " groups of " + std::to_string(group_size) +
                ": each the ranks that pass one micro-batch's activations from stage to stage; "
                "<code>--color-by stage</code> colours the stages)"
          : "its <b>" + H(Name(coloring)) + "</b> group (" + std::to_string(pic.groups) + " groups of " +
                std::to_string(group_size) + ")";
  const std::string cells =
      pic.compact ? "The map is compact above " + std::to_string(kCompactMapAboveGpus) +
                        " GPUs: each cell is a node, labelled with its first rank and filled with a stripe per "
                        "group on it, coloured by " + colour_text +
                        "; heavy lines separate neighbouring nodes of different groups; hatched: idle GPUs ("
      : "Each cell is a GPU labelled with the rank on it, coloured by " + colour_text +
            "; hatched cells are idle GPUs (";
  std::string caption = "Cluster <b>" + H(in.cluster.name) + "</b>: " + std::to_string(in.cluster.nodes) + " nodes of " +
                        std::to_string(in.cluster.gpus_per_node) + " GPUs, NVLink domains of " +
                        std::to_string(in.cluster.nvlink_domain_gpus) + " GPUs; " +
                        H(Name(in.layout.placement)) + " placement. " + cells +
                        std::to_string(pic.gpus_total - map.value().world()) +
                        " in the cluster). A red outline marks a rank in a heavy group (tp, cp, ep, ...) that "
                        "straddles NVLink domains. Hover a cell for its coordinates.";
  std::string body = Note(pic.note) + pic.svg;
  if (pic.straddles.empty()) {
    body += "<p class=\"caption\">No heavy group straddles an NVLink domain.</p>";
  } else {
    body += "<p class=\"caption\"><b>" + std::to_string(pic.straddles.size()) +
            " heavy groups straddle NVLink domains</b>";
    body += pic.straddles.size() > 20 ? " (the first 20 listed):" : ":";
    body += "</p><table><tr><th>kind</th><th>group</th><th>ranks per domain</th></tr>";
    for (size_t i = 0; i < pic.straddles.size() && i < 20; ++i) {
      const Straddle& s = pic.straddles[i];
      std::string counts;
      for (int c : s.ranks_per_domain) counts += (counts.empty() ? "" : " + ") + std::to_string(c);
      body += "<tr><td>" + H(Name(s.kind)) + "</td><td class=\"num\">" + std::to_string(s.group_index) +
              "</td><td>" + counts + "</td></tr>";
    }
    body += "</table>";
  }
  return Section("rank-map", "Rank map of the best layout", caption, body);
}

std::string CandidatesSection(const PlanSummary& plan) {
  bool distinct = false;
  for (const PlanCandidate& c : plan.candidates) distinct = distinct || c.equivalent_layouts > 1;
  std::string table = "<table><tr><th>#</th><th>layout</th><th>step</th><th>tokens/s</th><th>MFU</th>"
                      "<th>peak memory</th>" + std::string(distinct ? "<th>layouts</th>" : "") + "</tr>";
  for (size_t i = 0; i < plan.candidates.size() && i < kNumberedCandidates; ++i) {
    const PlanCandidate& c = plan.candidates[i];
    table += "<tr><td class=\"num\">" + std::to_string(i + 1) + "</td><td><code>" + LayoutHtml(c.layout) +
             "</code></td><td class=\"num\">" + H(SecondsText(c.step_time_s)) + "</td><td class=\"num\">" +
             TokensText(c.tokens_per_s) + "</td><td class=\"num\">" + Fmt("%.1f%%", c.mfu * 100) +
             "</td><td class=\"num\">" + H(GibText(c.peak_gib)) + "</td>" +
             (distinct ? "<td class=\"num\">" + WithCommas(c.equivalent_layouts) + "</td>" : "") + "</tr>";
  }
  table += "</table>";
  if (plan.candidates.size() > kNumberedCandidates) {
    table += Note("the first " + std::to_string(kNumberedCandidates) + " of " + std::to_string(plan.candidates.size()) +
                  " listed and numbered in the picture");
  }
  const double hbm = plan.candidates.front().hbm_gib;
  std::string caption =
      "All " + std::to_string(plan.candidates.size()) + " candidates the search kept (objective " + H(plan.objective) +
      "), numbered as in the table (#1 the best; <code>--candidate N</code> takes the same number). The orange point "
      "is the chosen layout (#1); red points are the Pareto front (no other candidate is both faster and smaller), "
      "joined by the dashed staircase; candidates with the same step time and memory share a point and a label "
      "(\"3,4\"). The red dashed line is the GPU's HBM (" + H(GibText(hbm)) + ")";
  if (plan.memory_limit_gib > 0 && plan.memory_limit_gib < hbm) {
    caption += ", the dotted one the plan's memory limit (" + H(GibText(plan.memory_limit_gib)) + ")";
  }
  caption += ". Hover a point for its layout.";
  if (distinct) caption += " <i>layouts</i>: how many layouts of equal score each row stands for.";
  return Section("candidates", "Candidates: step time against memory", caption,
                 "<div class=\"grid2\">" + CandidateScatterSvg(plan.candidates, plan.memory_limit_gib) + "<div>" +
                     table + "</div></div>");
}

std::string SecondsFormat(double v) { return SecondsText(v); }
std::string GibFormat(double v) { return GibText(v); }

std::string BreakdownSection(const PlanCandidate& best) {
  const std::vector<BarSegment> step = StepSegments(best);
  const std::vector<BarSegment> memory = MemorySegments(best);
  std::string terms = "<table><tr><th>memory term</th><th>GiB</th><th>formula</th></tr>";
  for (const MemoryTermGib& t : best.memory_terms) {
    if (t.gib <= 0) continue;
    terms += "<tr><td>" + H(t.name) + "</td><td class=\"num\">" + Fmt("%.3f", t.gib) + "</td><td><code>" + H(t.note) +
             "</code></td></tr>";
  }
  terms += "</table>";
  std::string comm = "<table><tr><th>communication</th><th>total</th><th>exposed</th></tr>";
  for (const CommKindSeconds& k : best.comm) {
    comm += "<tr><td>" + H(k.name) + "</td><td class=\"num\">" + H(SecondsText(k.total_s)) + "</td><td class=\"num\">" +
            H(SecondsText(k.exposed_s)) + "</td></tr>";
  }
  comm += "</table>";
  return Section("step", "The best layout's step",
                 "Step time " + H(SecondsText(best.step_time_s)) + " = " + std::to_string(best.microbatches) +
                     " micro-batches x the slowest stage's time + the pipeline bubble + exposed data-parallel "
                     "traffic + the optimizer step (the plan file's <code>step</code> and <code>comm</code>). "
                     "Hover a part for its seconds.",
                 StackedBarSvg(step, SecondsFormat, 0, "") + comm) +
         Section("memory", "The best layout's memory per GPU",
                 "Peak " + H(GibText(best.peak_gib)) + " on pipeline stage " + std::to_string(best.worst_stage) +
                     " of " + H(GibText(best.hbm_gib)) + " HBM (" + (best.fits ? "fits" : "does not fit") +
                     "): the memory model's named terms (doc/cost-model-memory.md); zero terms left out.",
                 StackedBarSvg(memory, GibFormat, best.hbm_gib, "HBM " + GibText(best.hbm_gib)) + terms);
}

Result<std::string> MeasurementsSection(const ReportOptions& o, const PlanFileInputs& in) {
  auto measured = LoadMeasurements(o.measurements);
  if (!measured.ok()) return measured.status();
  const MeasurementSet& m = measured.value();
  // As `compare` checks: the same layout (text, or canonical text parsed).
  bool same = m.layout == in.layout_text;
  if (!same) {
    auto parsed = ParseLayout(m.layout, in.layout.world, &in.job);
    same = parsed.ok() && FormatLayout(parsed.value()) == FormatLayout(in.layout);
  }
  if (m.world_size != in.layout.world || !same) {
    return Status::Error(o.measurements + " was measured for layout " + m.layout + " (world " +
                         std::to_string(m.world_size) + "), but " + o.plan + "'s best layout is " + in.layout_text +
                         " (world " + std::to_string(in.layout.world) + ")");
  }
  auto model = CostModel::Create(in.cluster, in.model, in.job);
  if (!model.ok()) return model.status();
  auto comparison = CompareMeasurements(m, in.layout, *model.value());
  if (!comparison.ok()) return comparison.status();
  const Comparison& c = comparison.value();
  std::vector<PredictedMeasuredPoint> points;
  std::string table = "<table><tr><th>op</th><th>group</th><th>case</th><th>bytes</th><th>measured</th>"
                      "<th>predicted</th><th>rel. error</th><th>model</th></tr>";
  size_t rows = 0;
  for (const OpComparison& op : c.ops) {
    if (!op.ran) {
      table += "<tr><td>" + H(op.op) + "</td><td>" + H(op.group_kind) + "</td><td colspan=\"6\">skipped: " +
               H(op.skip_reason) + "</td></tr>";
      continue;
    }
    for (const CaseComparison& k : op.cases) {
      if (k.predicted) {
        points.push_back({k.measured_s, k.predicted_s,
                          op.op + " over " + op.group_kind + ": " + k.name + "\nmeasured " + SecondsText(k.measured_s) +
                              ", predicted " + SecondsText(k.predicted_s) + " (" +
                              Fmt("%+.1f%%", k.relative_error * 100) + ")",
                          k.excluded.empty()});
      }
      if (++rows > 400) continue;
      table += "<tr><td>" + H(op.op) + "</td><td>" + H(op.group_kind) + " of " + std::to_string(op.group_size) +
               "</td><td>" + H(k.name) + "</td><td class=\"num\">" + std::to_string(k.bytes) + "</td><td class=\"num\">" +
               H(SecondsText(k.measured_s)) + "</td><td class=\"num\">" +
               (k.predicted ? H(SecondsText(k.predicted_s)) : "-") + "</td><td class=\"num\">" +
               (k.predicted ? Fmt("%+.1f%%", k.relative_error * 100) : "-") + "</td><td>" + H(k.model) +
               (k.excluded.empty() ? "" : " [not in the summary: " + H(k.excluded) + "]") + "</td></tr>";
    }
  }
  table += "</table>";
  if (rows > 400) table += Note("the first 400 of " + std::to_string(rows) + " cases listed");
  std::string summary = c.summary.cases == 0
                            ? "no case compared"
                            : "median |relative error| " + Fmt("%.1f%%", c.summary.median_abs_relative_error * 100) +
                                  ", max " + Fmt("%.1f%%", c.summary.max_abs_relative_error * 100) + " over " +
                                  std::to_string(c.summary.cases) + " cases";
  std::string caption = "foldbench's measurements (<code>" + H(o.measurements) + "</code>, backend " + H(m.backend) +
                        ") beside the cost model's predictions, as <code>foldplan compare</code> computes them: " +
                        H(summary) + ". Relative error = predicted / measured - 1; grey points are not in the summary.";
  if (m.backend == "mpi") {
    caption += " Measured on the mpi backend (host-memory emulation): predictions for the plan's GPUs are not "
               "expected to match.";
  }
  return Section("measurements", "Measured against predicted", caption,
                 "<div class=\"grid2\">" + PredictedMeasuredSvg(points) + "<div>" + table + "</div></div>");
}

Result<std::string> SimulationSection(const ReportOptions& o, const PlanFileInputs& in, const PlanSummary& summary) {
  auto read = ReadSimulation(o.simulation);
  if (!read.ok()) return read.status();
  const SimulationSummary& sim = read.value();
  // The simulation file names its layout by canonical text: another
  // layout is another plan's (or another candidate's) simulation.
  if (sim.layout != in.layout_text) {
    auto parsed = ParseLayout(sim.layout, in.layout.world, &in.job);
    if (!parsed.ok() || FormatLayout(parsed.value()) != FormatLayout(in.layout)) {
      return Status::Error(o.simulation + ": /layout: the simulation is of layout " + sim.layout + ", but " + o.plan +
                           "'s best layout is " + in.layout_text +
                           " (simulate it with: foldplan simulate --plan " + o.plan + " --json)");
    }
  }
  // The same layout under other inputs or overlaps gives another analytical step.
  std::string note;
  const double plan_step = summary.candidates.front().step_time_s;
  if (std::fabs(sim.analytical_step_s - plan_step) > 1e-9 * std::max(1.0, plan_step)) {
    note = "the simulation's analytical step (" + SecondsText(sim.analytical_step_s) + ") is not the plan's (" +
           SecondsText(plan_step) +
           "): it was simulated with other inputs or overlaps, or by another version of the cost model";
  }
  const SimPicture path = CriticalPathSvg(sim);
  const SimPicture memory = MemoryTimelineSvg(sim);
  const std::string caption =
      "<code>" + H(o.simulation) + "</code>: schedule " + H(sim.schedule) + ", simulated step " +
      H(SecondsText(sim.simulated_step_s)) + " against the analytical " + H(SecondsText(sim.analytical_step_s)) +
      " (bubble " + Fmt("%.1f%%", sim.simulated_bubble_fraction * 100) +
      " of the pipeline). The critical path: each bar a stretch of one rank's pass (F forward, B backward, "
      "W weight gradients, step: data-parallel and optimizer work).";
  std::string legend = "<div class=\"legend\"><span><span class=\"swatch\" style=\"background:#4e79a7\"></span>F</span>"
                       "<span><span class=\"swatch\" style=\"background:#f28e2b\"></span>B</span>"
                       "<span><span class=\"swatch\" style=\"background:#59a14f\"></span>W</span>"
                       "<span><span class=\"swatch\" style=\"background:#9c755f\"></span>step</span></div>";
  return Section("simulation", "The simulated step", caption, Note(note) + Note(path.note) + legend + path.svg) +
         Section("simulated-memory", "Memory over the simulated step",
                 "Each simulated rank's memory (the memory model's static terms plus the activations of the chunks "
                 "in flight) at every change; dashed, the memory model's peak for that rank.",
                 Note(memory.note) + memory.svg);
}

}  // namespace

Result<std::string> BuildReportHtml(const ReportOptions& o) {
  auto summary = ReadPlanSummary(o.plan);
  if (!summary.ok()) return summary.status();
  auto inputs = LoadPlanFile(o.plan, 1);  // #1, the best
  if (!inputs.ok()) return inputs.status();
  const PlanSummary& plan = summary.value();
  const PlanFileInputs& in = inputs.value();
  const PlanCandidate& best = plan.candidates.front();

  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                     "<title>foldplan report: " + H(plan.model) + " on " + H(plan.cluster) + "</title><style>" +
                     kStyle + "</style></head>\n<body>\n";
  html += "<header><h1>foldplan report: " + H(plan.model) + " on " + H(plan.cluster) + " (" +
          std::to_string(in.layout.world) + " GPUs)</h1><div class=\"layout\">best layout: " + LayoutHtml(best.layout) +
          "</div>" + CannotRunBanner(best) + "<div class=\"kpis\"><span><b>" + H(SecondsText(best.step_time_s)) + "</b>step time</span><span><b>" +
          TokensText(best.tokens_per_s) + "</b>tokens/s</span><span><b>" + Fmt("%.1f%%", best.mfu * 100) +
          "</b>MFU</span><span><b>" + H(GibText(best.peak_gib)) + "</b>peak memory of " + H(GibText(best.hbm_gib)) +
          "</span><span><b>" + H(plan.job) + "</b>job</span><span><b>" + H(o.plan) + "</b>plan file</span></div></header>\n<main>\n";
  html += RankMapSection(in, o);
  html += CandidatesSection(plan);
  html += BreakdownSection(best);
  if (!o.measurements.empty()) {
    auto section = MeasurementsSection(o, in);
    if (!section.ok()) return section.status();
    html += section.value();
  }
  if (!o.simulation.empty()) {
    auto section = SimulationSection(o, in, plan);
    if (!section.ok()) return section.status();
    html += section.value();
  }
  html += "</main>\n</body></html>\n";
  return html;
}

}  // namespace foldplan
