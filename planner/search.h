// The search: every legal layout (planner/enumerate.h), scored in parallel
// through a LayoutScorer, the best `top` kept. Enumeration streams into
// scoring: threads claim work items (LayoutEnumerator) one at a time and
// hand each family of legal layouts (planner/layout_family.h) to the
// scorer as it is found (LayoutScorer::ScoreFamily), into their own shard
// (the best `top` and the counts), so memory holds `top` layouts per
// thread, never the legal set; the shards merge into the same result for
// any thread count. Layouts that do not fit in memory are counted under
// Rule::kFitsMemory; those that fit but exceed a memory limit the caller
// sets are counted apart (over_memory_limit).
// Each layout is scored under its thread's current bound (the worst kept
// objective once `top` are kept; LayoutScorer::ScoreBounded), so a scorer
// may skip the objective of a layout that cannot rank (counted in pruned).
// With `distinct`, layouts whose scores are equal to the bit (objective,
// step time and peak memory) are one candidate: the best `top` such
// classes are kept, each with the layout of smallest canonical text and
// how many layouts it stands for.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "planner/enumerate.h"
#include "planner/scoring.h"

namespace foldplan {

// The most scoring threads a search starts (`plan --threads`); more only
// adds threads the system may refuse (doc/formats.md, Command-line values).
inline constexpr int kMaxSearchThreads = 256;

struct SearchOptions {
  int top = 10;      // candidates kept, best first
  int threads = 2;   // scoring threads, held to [1, kMaxSearchThreads]
  // Called from the calling thread with the fraction of work items done,
  // about ten times a second, non-decreasing, 1 last; may be empty.
  std::function<void(double fraction)> progress = nullptr;
  // Only the layouts that agree with these (planner/enumerate.h); may be null.
  const LayoutPins* pins = nullptr;
  // When set, the search also counts the fitting layouts whose objective is
  // lower than this (to rank a reference layout, e.g. a recipe's).
  std::optional<double> rank_objective = std::nullopt;
  // Fitting layouts whose peak exceeds this many GiB are refused (counted
  // in SearchResult::over_memory_limit, not ranked).
  std::optional<double> max_peak_memory_gib = std::nullopt;
  // Collapse layouts of bit-equal scores into one candidate (see above).
  bool distinct = false;
};

struct ScoredLayout {
  Layout layout;
  LayoutScore score;
  uint64_t equivalents = 1;  // with `distinct`: layouts of this score, this one included
};

struct SearchResult {
  // Not ok when the system refused a scoring thread: nothing is ranked then
  // (best is empty) and the message says how many threads were asked for.
  Status status;
  Enumeration enumeration;            // counts include the memory rejections
  std::vector<ScoredLayout> best;     // at most `top`, lowest objective first
  uint64_t scored = 0;                // legal layouts scored
  uint64_t better_than_reference = 0; // fitting layouts below SearchOptions::rank_objective
  uint64_t over_memory_limit = 0;     // fit in HBM but over SearchOptions::max_peak_memory_gib
  // Of the fitting layouts within the limit, those not ranked because the
  // scorer proved their objective above what the scoring thread already
  // kept (LayoutScorer::ScoreBounded). Changes nothing else in the result,
  // but depends on the thread count and timing: for reports of work saved.
  uint64_t pruned = 0;
};

// Ties on the objective are broken by step time (with `distinct`, then
// peak memory), then by the layout's canonical text, so the result does not
// depend on thread timing. A class's count is exact: a shard that drops a
// class keeps `top` better ones, so none of its later members re-enters.
SearchResult SearchLayouts(const LegalityContext& ctx, const LayoutScorer& scorer,
                           const SearchOptions& options = {});

}  // namespace foldplan
