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

// The one rule for every flag's value, attached to every option of `app`'s
// commands (FinishCliDefinition calls it, so a flag added later gets it):
// no value is empty; an option whose type name says a count (INT, N, K, and
// the lists of them) takes a decimal integer that fits its type, UINT a
// non-negative one, FLOAT and X a finite decimal number (core/decimal_text.h).
// A value that breaks it is a usage error naming the flag and the value.
void ApplyValueRules(CLI::App& app);

// CLI11's parse error `e` of `argv` against the definition `app`, as
// foldplan says it (no "foldplan: " prefix, no newline): an unknown
// command or flag with the nearest one, a value that is not a number with
// the type expected, a missing value, flags that exclude or need each
// other, a required flag; anything else as CLI11 put it, after the command.
std::string ParseErrorText(const CLI::App& app, const CLI::ParseError& e, int argc, const char* const* argv);

}  // namespace foldplan
