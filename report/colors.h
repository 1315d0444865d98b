// The report's colours, in one place so every picture colours alike.
// Groups of the rank map: a categorical palette for up to ten groups, then
// hues spread by the golden angle, so neighbouring group indices always
// differ visibly. Memory terms and step parts: a fixed colour per name
// (costmodel/memory.h's term names, the step's parts), so a term has the
// same colour in every report whatever terms it shows and in what order;
// a name outside the table (a communication kind, a newer writer's term)
// gets a hue from a hash of the name, fixed as well.
#pragma once

#include <string>
#include <string_view>

namespace foldplan {

// The fill of group `index` (>= 0) among `count` groups, as CSS colour text.
std::string GroupColor(int index, int count);
// A memory term's fill, by the term's name.
std::string MemoryTermColor(std::string_view term);
// A step part's fill, by the part's name ("compute", "pipeline bubble",
// "exposed <kind>", ...).
std::string StepPartColor(std::string_view part);
// Lines of a chart told apart by position (the simulated ranks' memory).
std::string SeriesColor(int index);
// Text drawn on `fill` (a colour these functions return): dark on light
// fills, white on dark ones.
std::string TextColorOn(std::string_view fill);

}  // namespace foldplan
