#include "cli/compare_command.h"

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/inputs.h"
#include "cli/output.h"
#include "core/formats.h"
#include "core/text_table.h"
#include "costmodel/evaluate.h"
#include "costmodel/measured_op_prediction.h"
#include "costmodel/plan_file.h"
#include "inputs/measurements.h"
#include "planner/layout.h"

namespace foldplan {
namespace {

using json = nlohmann::ordered_json;
using Align = TextTable::Align;

// "45.3 ms", "812 us", "1.20 s".
std::string Seconds(double s) {
  char text[32];
  if (s >= 1) std::snprintf(text, sizeof text, "%.3g s", s);
  else if (s >= 1e-3) std::snprintf(text, sizeof text, "%.3g ms", s * 1e3);
  else std::snprintf(text, sizeof text, "%.3g us", s * 1e6);
  return text;
}

std::string Percent(double x, bool sign) {
  char text[32];
  std::snprintf(text, sizeof text, sign ? "%+.1f%%" : "%.1f%%", x * 100);
  return text;
}

std::string SummaryText(const ErrorSummary& s) {
  if (s.cases == 0) return "no case compared";
  return "median |relative error| " + Percent(s.median_abs_relative_error, false) + ", max " +
         Percent(s.max_abs_relative_error, false) + " over " + std::to_string(s.cases) +
         (s.cases == 1 ? " case" : " cases");
}

json SummaryJson(const ErrorSummary& s) {
  return {{"median_abs_relative_error", s.median_abs_relative_error},
          {"max_abs_relative_error", s.max_abs_relative_error},
          {"cases", s.cases}};
}

// The note for host-memory measurements: predictions are for the plan's GPUs.
std::string BackendNote(const MeasurementSet& m) {
  if (m.backend != "mpi") return "";
  return "note: " + m.source + " was measured on the mpi backend (host-memory emulation): predictions for "
         "the plan's GPU cluster are not expected to match; a calibration fitted from the same host "
         "(--calibration) is what makes them comparable";
}

std::string ComparisonJson(const CompareOptions& o, const MeasurementSet& m, const CostModel& model,
                           const Comparison& c) {
  json ops = json::array();
  for (const OpComparison& op : c.ops) {
    json entry = {{"op", op.op}, {"group_kind", op.group_kind}, {"group_size", op.group_size},
                  {"status", op.ran ? "ran" : op.skip_reason}};
    json cases = json::array();
    for (const CaseComparison& k : op.cases) {
      json one = {{"case", k.name}, {"bytes", k.bytes}};
      if (k.gemm) one["gemm"] = {{"batch", k.gemm->batch}, {"m", k.gemm->m}, {"n", k.gemm->n}, {"k", k.gemm->k}};
      one["measured_s"] = k.measured_s;
      one["predicted_s"] = k.predicted ? json(k.predicted_s) : json(nullptr);
      one["relative_error"] = k.predicted ? json(k.relative_error) : json(nullptr);
      one["model"] = k.model;
      one["in_summary"] = k.excluded.empty();
      if (!k.excluded.empty()) one["excluded"] = k.excluded;
      cases.push_back(one);
    }
    entry["cases"] = cases;
    if (op.ran) entry["summary"] = SummaryJson(op.summary);
    ops.push_back(entry);
  }
  json notes = json::array();
  if (const std::string note = BackendNote(m); !note.empty()) notes.push_back(note.substr(6));
  json doc = {{"schema", kComparisonSchema},
              {"plan", o.plan},
              {"measurements", o.measurements},
              {"layout", m.layout},
              {"backend", m.backend},
              {"calibration", model.comm_params().source},
              {"notes", notes},
              {"ops", ops},
              {"summary", SummaryJson(c.summary)}};
  return doc.dump(1) + "\n";
}

std::string ComparisonText(const CompareOptions& o, const MeasurementSet& m, const CostModel& model,
                           const Comparison& c) {
  std::string text = "plan " + o.plan + ": " + m.layout + "\nmeasurements " + o.measurements + ": backend " +
                     m.backend + ", " + std::to_string(m.ranks) + " ranks\ncalibration: " +
                     model.comm_params().source + "\n";
  if (const std::string note = BackendNote(m); !note.empty()) text += note + "\n";
  std::string skipped;
  for (const OpComparison& op : c.ops) {
    if (!op.ran) {
      skipped += "skipped: " + op.op + " over " + op.group_kind + " (" + op.skip_reason + ")\n";
      continue;
    }
    const bool compute = op.op == "compute";
    TextTable table({"case", compute ? "shape (batch x m x n x k)" : "S bytes", "measured", "predicted",
                     "rel. error", "model"},
                    {Align::kLeft, Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kLeft});
    for (const CaseComparison& k : op.cases) {
      std::string size = std::to_string(k.bytes);
      if (compute && k.gemm) {
        size = std::to_string(k.gemm->batch) + " x " + std::to_string(k.gemm->m) + "x" +
               std::to_string(k.gemm->n) + "x" + std::to_string(k.gemm->k);
      }
      std::string model_text = k.model;
      if (!k.excluded.empty()) model_text += " [not in the summary: " + k.excluded + "]";
      table.AddRow({k.name, size, Seconds(k.measured_s), k.predicted ? Seconds(k.predicted_s) : "-",
                    k.predicted ? Percent(k.relative_error, true) : "-", model_text});
    }
    text += "\n" + op.op + " over " + op.group_kind + " groups of " + std::to_string(op.group_size) + ":\n" +
            table.Render("  ") + "  " + op.op + ": " + SummaryText(op.summary) + "\n";
  }
  if (!skipped.empty()) text += "\n" + skipped;
  text += "\nsummary: " + SummaryText(c.summary) +
          " (relative error = predicted / measured - 1; cases with wrong elements or a part not modelled are "
          "listed but not summarised)\n";
  return text;
}

}  // namespace

int RunCompare(const CompareOptions& options, std::ostream& out, std::ostream& err) {
  if (options.plan.empty()) return Usage(err, Status::Error("compare needs --plan FILE (a foldplan.plan/v1 file)"));
  if (options.measurements.empty()) {
    return Usage(err, Status::Error("compare needs --measurements FILE (foldbench's -o output for the plan)"));
  }
  auto plan = LoadPlanFile(options.plan);
  if (!plan.ok()) return Fail(err, plan.status());
  auto measured = LoadMeasurements(options.measurements);
  if (!measured.ok()) return Fail(err, measured.status());
  PlanFileInputs& in = plan.value();
  const MeasurementSet& m = measured.value();
  if (m.ops.empty()) {
    return Fail(err, Status::Error(options.measurements + ": /ops: no op measured (the list is empty): nothing to "
                                   "compare with the plan's predictions"));
  }
  // The same layout: the same text, or the same canonical text once parsed
  // against the plan's job (older files leave out the recipe keys, which
  // then take the job's first candidates).
  auto same_layout = [&] {
    if (m.layout == in.layout_text) return true;
    auto parsed = ParseLayout(m.layout, in.layout.world, &in.job);
    return parsed.ok() && FormatLayout(parsed.value()) == FormatLayout(in.layout);
  };
  if (m.world_size != in.layout.world || !same_layout()) {
    return Fail(err, Status::Error(options.measurements + " was measured for layout " + m.layout + " (world " +
                                   std::to_string(m.world_size) + "), but " + options.plan +
                                   "'s best layout is " + in.layout_text + " (world " +
                                   std::to_string(in.layout.world) + ")"));
  }
  // As LoadInputs does for the commands that cost.
  if (!options.calibration.empty()) in.cluster.calibration = options.calibration;
  CalibrationUse use;
  use.allow_other_gpu = options.force_calibration;
  auto model = CostModel::Create(in.cluster, in.model, in.job, use);
  if (!model.ok()) return Fail(err, model.status());
  const CostModel& cost = *model.value();
  WarnAboutCalibrationGpu(cost.comm_params(), in.cluster, err);
  auto comparison = CompareMeasurements(m, in.layout, cost);
  if (!comparison.ok()) return Fail(err, comparison.status());
  WarnAboutFitMisses(cost.comm_params(), err);
  out << (options.json ? ComparisonJson(options, m, cost, comparison.value())
                       : ComparisonText(options, m, cost, comparison.value()));
  return 0;
}

}  // namespace foldplan
