// CSV as RFC 4180 writes it, for `plan --format csv` and `enumerate
// --format csv`: a field is quoted when it holds a comma, a double quote,
// CR or LF (its quotes doubled), every record ends with CRLF, and numbers
// are written so that they read back as the same double the JSON holds.
// doc/formats.md ("CSV") lists each command's columns.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace foldplan {

std::string CsvField(std::string_view text);
// The fields joined by commas, each through CsvField, and CRLF.
std::string CsvRecord(const std::vector<std::string>& fields);
// "%.17g": the nearest decimal text that parses back to `v` exactly.
std::string CsvNumber(double v);

}  // namespace foldplan
