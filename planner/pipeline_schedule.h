// The pipeline schedules live in inputs/pipeline_schedule.h (job files name
// them, and inputs/ may not depend on the planner). This header stays so
// that planner code and branches that include it from here keep building.
#pragma once

#include "inputs/pipeline_schedule.h"
