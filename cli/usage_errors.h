// Command-line mistakes in foldplan's own words, with the nearest valid
// name: a typo'd command, flag or value gets "did you mean ...?" by edit
// distance, and CLI11's parse errors ("A subcommand is required", "Could
// not convert: --top = abc") are reworded as foldplan's usage errors
// (exit 2, doc/formats.md "Exit codes").
#pragma once

#include <string>

#include "core/nearest_name.h"  // DidYouMean, ChoiceNames: the commands' own messages use them

namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace foldplan {

// CLI11's parse error `e` of `argv` against the definition `app`, as
// foldplan says it (no "foldplan: " prefix, no newline): an unknown
// command or flag with the nearest one, a value that is not a number with
// the type expected, a missing value, flags that exclude or need each
// other, a required flag; anything else as CLI11 put it, after the command.
std::string ParseErrorText(const CLI::App& app, const CLI::ParseError& e, int argc, const char* const* argv);

}  // namespace foldplan
