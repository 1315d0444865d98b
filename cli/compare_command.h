// `foldplan compare`: for every op and case foldbench measured for a plan
// (a foldplan.measurements/v1 file), the cost model's predicted time beside
// the measured median with the relative error, then the summary (median
// and max |relative error|, overall and per op), as a table or as JSON
// (foldplan.comparison/v1). The predictions are costmodel/
// measured_op_prediction.h's; doc/validate.md "foldplan compare" derives
// them and documents the JSON.
//
// Exit status (doc/formats.md "Exit codes"): 0 compared; 1 a file that
// cannot be read, or measurements made for another layout or world size
// than the plan's best; 2 usage (--plan or --measurements missing).
#pragma once

#include <ostream>
#include <string>

namespace foldplan {

struct CompareOptions {
  std::string plan;                // --plan FILE: foldplan.plan/v1
  std::string measurements;        // --measurements FILE: foldplan.measurements/v1 of that plan
  std::string calibration;         // --calibration FILE instead of the plan's cluster's
  bool force_calibration = false;  // --force-calibration: accept a file made on another GPU
  bool json = false;               // --json: foldplan.comparison/v1
};

int RunCompare(const CompareOptions& options, std::ostream& out, std::ostream& err);

}  // namespace foldplan
