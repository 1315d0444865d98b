// foldplan topo: a cluster as the planner sees it (cli/inputs.h states what a command call returns).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/inputs.h"

namespace foldplan {

struct TopoOptions {
  InputOptions inputs;
  bool json = false;
};
int RunTopo(const TopoOptions& options, std::ostream& out, std::ostream& err);

}  // namespace foldplan
