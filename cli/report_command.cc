#include "cli/report_command.h"

#include "cli/output.h"
#include "cli/usage_errors.h"
#include "report/rank_map_svg.h"
#include "report/report.h"
#include "report/report_inputs.h"

namespace foldplan {

int RunReport(const ReportCommandOptions& options, std::ostream& out, std::ostream& err) {
  if (options.plan.empty()) return Usage(err, Status::Error("report needs --plan FILE (a foldplan.plan/v1 file)"));
  if (options.output.empty()) return Usage(err, Status::Error("report needs -o FILE (the HTML page to write)"));
  ReportOptions o;
  o.plan = options.plan;
  o.measurements = options.measurements;
  o.simulation = options.simulation;
  if (!options.color_by.empty()) {
    o.color_by = ColoringNamed(options.color_by);
    if (!o.color_by) {
      const std::vector<std::string> names(std::begin(kColoringNames), std::end(kColoringNames));
      std::string listed;
      for (const std::string& n : names) listed += (listed.empty() ? "" : ", ") + n;
      return Usage(err, Status::Error("--color-by: expected one of " + listed + ", got '" + options.color_by + "'" +
                                      DidYouMean(options.color_by, names)));
    }
  }
  if (options.max_gpus < 1) {
    return Usage(err, Status::Error("--max-gpus: expected at least 1, got " + std::to_string(options.max_gpus)));
  }
  o.max_gpus = options.max_gpus;
  auto html = BuildReportHtml(o);
  if (!html.ok()) return Fail(err, html.status());
  if (Status s = WriteOrPrint(html.value(), options.output, out, err); !s.ok()) return Fail(err, s);
  // The page says so at its top; stderr too (the file was read above).
  if (auto plan = ReadPlanSummary(options.plan); plan.ok() && !plan->candidates.empty()) {
    err << VerdictWarning(VerdictOf(plan->candidates.front()), "the plan's best layout");
  }
  return 0;
}

}  // namespace foldplan
