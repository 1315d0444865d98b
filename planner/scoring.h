// The planner ranks layouts through this small interface; the cost model
// implements it (CostScorer in costmodel/evaluate.h), so the planner never
// includes the cost model.
#pragma once

#include <cstdint>

#include "planner/layout.h"
#include "planner/layout_family.h"

namespace foldplan {

struct LayoutScore {
  bool fits = true;            // false: the layout does not fit in GPU memory
  double step_time_s = 0;      // one optimizer step
  double peak_memory_gib = 0;  // the worst rank's peak
  double objective = 0;        // what the search minimises; lower is better
  // Set only by ScoreBounded: the layout fits, its peak_memory_gib is exact,
  // and its objective is proven greater than the bound it was given, so
  // step_time_s and objective were not computed (they are 0).
  bool pruned = false;
};

// Where LayoutScorer::ScoreFamily reports its members' scores.
class ScoreSink {
 public:
  virtual ~ScoreSink() = default;
  // The bound members may be scored under now (ScoreBounded's
  // prune_above); it never rises during a family.
  virtual double PruneAbove() const = 0;
  // One member and its score.
  virtual void Scored(const Layout& layout, const LayoutScore& score) = 0;
  // `count` members with this same score, which does not fit or is pruned
  // (such a member cannot rank, so which layouts they are is not needed).
  virtual void ScoredAlike(const LayoutScore& score, uint64_t count) = 0;
};

class LayoutScorer {
 public:
  virtual ~LayoutScorer() = default;
  // Called concurrently from several search threads: must be thread-safe.
  virtual LayoutScore Score(const Layout& layout) const = 0;
  // The same when only an objective of at most `prune_above` matters: a
  // scorer may then return `pruned` (fits and peak_memory_gib exact, the
  // objective proven > prune_above, strictly) instead of computing the
  // objective; otherwise it returns exactly what Score does. The default
  // never prunes. Thread-safe as Score.
  virtual LayoutScore ScoreBounded(const Layout& layout, double prune_above) const {
    (void)prune_above;
    return Score(layout);
  }
  // Every member of `family` (planner/layout_family.h), each exactly once,
  // with its Score, or pruned (as ScoreBounded may) when its objective is
  // proven above a bound the sink gave during the family, which is at
  // least sink.PruneAbove() at the time. The default scores the members one
  // by one in order through ScoreBounded; a scorer may share work across
  // them and report alike members together.
  virtual void ScoreFamily(const LayoutFamily& family, ScoreSink& sink) const {
    family.ForEachMember([&](const Layout& layout) { sink.Scored(layout, ScoreBounded(layout, sink.PruneAbove())); });
  }
};

}  // namespace foldplan
