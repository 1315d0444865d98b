// Small output helpers shared by the subcommands.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>

#include "core/status.h"

namespace foldplan {

// Prints "foldplan: <message>" to `err` and returns exit code 1: an invalid
// input or a negative answer (doc/formats.md, Exit codes).
int Fail(std::ostream& err, const Status& status);
// The same with exit code 2: a command-line usage error (a flag value out of
// its range or not one of its names, a malformed --layout, flags that
// exclude each other).
int Usage(std::ostream& err, const Status& status);

// The width text output is fitted to (tables narrowed, lines wrapped,
// core/text_table.h): $COLUMNS when it is an integer in [20, 10000], else
// the terminal's width when stdout is one, else 120. JSON and CSV are
// never fitted.
size_t OutputColumns();

// `v` with `digits` decimals ("%.*f"), for tables.
std::string Fixed(double v, int digits);

// Writes `text` to `path` atomically and says so on `err`; with an empty
// path prints it to `out` instead.
Status WriteOrPrint(const std::string& text, const std::string& path, std::ostream& out,
                    std::ostream& err);

}  // namespace foldplan
