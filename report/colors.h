// The report's colours: a categorical palette for up to ten groups, then
// hues spread by the golden angle, so neighbouring group indices always
// differ visibly. One place, so every picture colours alike.
#pragma once

#include <string>

namespace foldplan {

// The fill of group `index` (>= 0) among `count` groups, as CSS colour text.
std::string GroupColor(int index, int count);
// Fixed colours of the step and memory parts, by position in a legend.
std::string PartColor(int index);

}  // namespace foldplan
