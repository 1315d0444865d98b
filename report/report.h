// `foldplan report`'s page: one self-contained HTML file (inline CSS and
// SVG, no script, no network, no external font) showing a plan file:
//   the best layout's rank map on the cluster (rank_map_svg.h),
//   the candidates' step time against peak memory (scatter_svg.h),
//   the best layout's step and memory breakdowns (breakdown_svg.h),
//   with --measurements, foldbench's cases against the cost model's
//     predictions (costmodel/measured_op_prediction.h, as `compare`),
//   with --simulation, the simulator's critical path and memory (sim_svg.h).
// doc/report.md says where every number comes from.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"
#include "report/rank_map_svg.h"

namespace foldplan {

struct ReportOptions {
  std::string plan;          // foldplan.plan/v1 (required)
  std::string measurements;  // foldplan.measurements/v1 of the plan's best layout ("": none)
  std::string simulation;    // foldplan.simulation/v1 ("": none)
  std::optional<MapColoring> color_by;  // unset: DefaultColoring
  int max_gpus = 1024;       // GPUs drawn in the rank map at most
};

// The page. Errors: a file that cannot be read (naming the file and the
// field), measurements or a simulation of another layout than the plan's
// best (the simulation file names its layout's canonical text, `layout`,
// which identifies the plan's candidate: the message gives both).
Result<std::string> BuildReportHtml(const ReportOptions& options);

}  // namespace foldplan
