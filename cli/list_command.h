// foldplan list: the shipped inputs (cli/inputs.h states what a command call returns).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/inputs.h"

namespace foldplan {

// `foldplan list [CATEGORY...] [--long] [--json]`: the shipped inputs, all
// four kinds or the categories named (clusters, models, jobs, recipes; the
// singular too); --long prints each description whole, wrapped.
struct ListOptions {
  std::vector<std::string> category;
  bool long_descriptions = false;
  bool json = false;
};
inline constexpr size_t kListDescriptionChars = 100;  // list without --long cuts each description to this
int RunList(const ListOptions& options, std::ostream& out, std::ostream& err);

}  // namespace foldplan
