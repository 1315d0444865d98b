// foldplan enumerate: the legal layouts and the rule each other one breaks (cli/inputs.h states what a command call returns).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/inputs.h"

namespace foldplan {

struct EnumerateOptionsCli {
  InputOptions inputs;
  bool json = false;
  bool why = false;                   // per-rule rejection counts
  int limit = 40;                     // layouts shown in the text table; 0 = all; >= 0
  std::optional<std::string> layout;  // check this one layout instead of enumerating
  std::optional<std::string> fix;     // --fix: only the layouts that agree with these keys
  std::string format = "text";        // --format text|json|csv (--json is json)
};
int RunEnumerate(const EnumerateOptionsCli& options, std::ostream& out, std::ostream& err);

}  // namespace foldplan
