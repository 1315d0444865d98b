// A layout as JSON, the same object wherever a layout appears in output
// (enumeration, plan candidates): degrees, order, options, stage layers and
// the canonical --layout text; "schedule" only when the layout names one
// other than its implied one (Layout::non_default_schedule).
#pragma once

#include <nlohmann/json.hpp>

#include "planner/layout.h"

namespace foldplan {

nlohmann::ordered_json LayoutToJson(const Layout& layout);

}  // namespace foldplan
