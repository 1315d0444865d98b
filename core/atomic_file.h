// Writing output files so that a reader never sees a half-written one: the
// text goes to a temporary file beside the target, which is then renamed
// over it. On any failure the target is left as it was.
#pragma once

#include <string>

#include "core/status.h"

namespace foldplan {

Status WriteFileAtomically(const std::string& path, const std::string& contents);

// Whole file as text; error names the path.
Result<std::string> ReadTextFile(const std::string& path);

}  // namespace foldplan
