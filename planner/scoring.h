// The planner ranks layouts through this small interface; the cost model
// implements it (CostScorer in costmodel/evaluate.h), so the planner never
// includes the cost model.
#pragma once

#include "planner/layout.h"

namespace foldplan {

struct LayoutScore {
  bool fits = true;            // false: the layout does not fit in GPU memory
  double step_time_s = 0;      // one optimizer step
  double peak_memory_gib = 0;  // the worst rank's peak
  double objective = 0;        // what the search minimises; lower is better
};

class LayoutScorer {
 public:
  virtual ~LayoutScorer() = default;
  // Called concurrently from several search threads: must be thread-safe.
  virtual LayoutScore Score(const Layout& layout) const = 0;
};

}  // namespace foldplan
