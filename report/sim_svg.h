// The simulator's step (a `foldplan.simulation/v1` file, report_inputs.h)
// drawn: the critical path as a timeline (a row per rank it crosses, a bar
// per segment coloured by pass) and each simulated rank's memory over the
// step (a staircase per rank, the memory model's peak dashed). Bounded: at
// most kMaxSegments segments, kMaxMemoryRanks ranks (report_inputs.h: what
// the reader keeps) and kMaxMemoryPoints
// points per rank (the bucket's highest kept, so peaks survive); the
// caption says when something was left out.
#pragma once

#include <string>

#include "report/report_inputs.h"

namespace foldplan {

inline constexpr size_t kMaxMemoryPoints = 1500;

struct SimPicture {
  std::string svg;
  std::string note;  // "" or what was left out
};

SimPicture CriticalPathSvg(const SimulationSummary& sim);
SimPicture MemoryTimelineSvg(const SimulationSummary& sim);

}  // namespace foldplan
