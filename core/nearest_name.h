// The name nearest to a mistyped one, for messages that say "did you mean
// ...?": a typo'd command, flag, value or shipped name (edit distance).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace foldplan {

// The name in `names` nearest to `typed`, case aside: the one of least
// edit distance (insertions, deletions, substitutions and swaps of
// neighbours) when that is at most a third of the longer name's length
// (at least 1), else the only name `typed` is a prefix of (2 characters or
// more); none when neither.
std::optional<std::string> NearestName(std::string_view typed, const std::vector<std::string>& names);

// "; did you mean \"plan\"?" for the nearest name, "" when none is near.
std::string DidYouMean(std::string_view typed, const std::vector<std::string>& names);

// The names a choices text lists: the words of letters, digits, '-', '_'
// and '+' in "bf16, fp8-delayed, fp8-tensorwise (alias fp8)" or
// "text|json|csv", the joining words ("or", "alias", "one", "of") left out.
std::vector<std::string> ChoiceNames(std::string_view text);

}  // namespace foldplan
