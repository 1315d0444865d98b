// `foldplan diff`: two layouts' costs side by side on the same inputs, and
// the differences that explain the gap (the same comparison as plan's "why
// it wins", cli/plan_text.h). The layouts come from two --layout flags on
// the input flags, or from two candidates of a foldplan.plan/v1 file.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/inputs.h"

namespace foldplan {

struct DiffOptions {
  InputOptions inputs;
  std::vector<std::string> layouts;  // --layout A --layout B (exactly two), or:
  std::string plan;                  // --plan FILE: its inputs and
  std::string candidates;            //   --candidates I,J (1: the best), default 1,2
  bool json = false;                 // --json: foldplan.diff/v1
};
// 0 when both layouts are legal and costed (either may not fit in memory:
// the figures say so, and a warning on stderr); 1 for an illegal layout or
// a bad plan file; 2 usage.
int RunDiff(const DiffOptions& options, std::ostream& out, std::ostream& err);

}  // namespace foldplan
