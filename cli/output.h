// Small output helpers shared by the subcommands.
#pragma once

#include <ostream>
#include <string>

#include "core/status.h"

namespace foldplan {

// Prints "foldplan: <message>" to `err` and returns exit code 1.
int Fail(std::ostream& err, const Status& status);

// Writes `text` to `path` atomically and says so on `err`; with an empty
// path prints it to `out` instead.
Status WriteOrPrint(const std::string& text, const std::string& path, std::ostream& out,
                    std::ostream& err);

}  // namespace foldplan
