// `foldplan report`: a plan file (with foldbench's measurements and a
// simulation, when given) as one self-contained HTML page with pictures
// (report/report.h; doc/report.md).
//
// Exit status: 0 written; 1 a file that cannot be read or measurements of
// another layout, a simulation of another layout; 2 usage (--plan or -o
// missing, --color-by not one of its names).
#pragma once

#include <ostream>
#include <string>

namespace foldplan {

struct ReportCommandOptions {
  std::string plan;          // --plan FILE
  std::string measurements;  // --measurements FILE
  std::string simulation;    // --simulation FILE (simulate --json output)
  std::string color_by;      // --color-by tp|cp|dp|ep|edp|pp|stage ("": the default)
  int max_gpus = 1024;       // --max-gpus N: GPUs drawn in the rank map
  std::string output;        // -o FILE
};

int RunReport(const ReportCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace foldplan
