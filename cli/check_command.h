// foldplan check: input files validated as their commands read them (cli/inputs.h states what a command call returns).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/inputs.h"

namespace foldplan {

// `foldplan check FILE...`: each file read as the input its "schema" names
// (cluster, model, job, recipe, foldbench's measurements), every field and
// cross-field rule checked,
// a cluster's topology built, a recipe's cluster, model, job and layout
// loaded. 0 when every file is valid, else 1 with each file's errors.
struct CheckOptions {
  std::vector<std::string> files;
};
int RunCheck(const CheckOptions& options, std::ostream& out, std::ostream& err);

}  // namespace foldplan
