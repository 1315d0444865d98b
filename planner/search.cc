#include "planner/search.h"

#include <algorithm>
#include <cassert>
#include <atomic>
#include <cstdint>
#include <chrono>
#include <limits>
#include <string>
#include <system_error>
#include <thread>

namespace foldplan {
namespace {

// The ranking: objective, then step time, then canonical text.
bool BetterThan(const LayoutScore& score, const Layout& layout, const ScoredLayout& b) {
  if (score.objective != b.score.objective) return score.objective < b.score.objective;
  if (score.step_time_s != b.score.step_time_s) return score.step_time_s < b.score.step_time_s;
  return FormatLayout(layout) < FormatLayout(b.layout);
}
bool Better(const ScoredLayout& a, const ScoredLayout& b) { return BetterThan(a.score, a.layout, b); }

// With `distinct`: the order of score classes (objective, step, peak),
// layouts of one class equal under it.
bool BetterClass(const ScoredLayout& a, const ScoredLayout& b) {
  if (a.score.objective != b.score.objective) return a.score.objective < b.score.objective;
  if (a.score.step_time_s != b.score.step_time_s) return a.score.step_time_s < b.score.step_time_s;
  return a.score.peak_memory_gib < b.score.peak_memory_gib;
}

// One class's members merged into `kept`: the counts add up and the
// smaller canonical text represents it.
void Merge(ScoredLayout* kept, ScoredLayout other) {
  kept->equivalents += other.equivalents;
  if (FormatLayout(other.layout) < FormatLayout(kept->layout)) kept->layout = std::move(other.layout);
}

// Keeps the best `top` of what one thread scores, and the thread's counts.
// A layout is copied only when it enters `best`. Aligned to a cache line
// (64 bytes on x86-64 and most ARM cores): the threads' shards sit side by
// side in one vector and are written per family, and a line shared between
// two would bounce between their cores.
struct alignas(64) Shard {
  std::vector<ScoredLayout> best;
  Enumeration counts;  // the thread's items' candidates and rejections
  uint64_t scored = 0;
  uint64_t rejected_memory = 0;
  uint64_t better = 0;  // below the reference objective
  uint64_t over_limit = 0;
  uint64_t pruned = 0;
  // The bound a layout is scored under (LayoutScorer::ScoreBounded): once
  // the shard holds `top`, the objective of its worst kept candidate (or
  // class), else +inf; at least the reference objective when one is set.
  // A layout whose objective is strictly above it changes nothing:
  //  - it is not counted below the reference (its objective >
  //    rank_objective);
  //  - Offer would drop it: without `distinct`, it ranks after best.back()
  //    on the objective alone; with `distinct`, its class (bit-equal
  //    objective) is none of the kept ones, all of lower objective, and it
  //    ranks after all of them, so it is not inserted. Nor would its class
  //    be among the merged result's: this shard keeps `top` classes better
  //    than it (Offer only ever improves what is kept), so `top` better
  //    ones exist overall, and its members counted by other shards are
  //    dropped in the merge as they would be without pruning.
  // Pruning therefore changes no ranked candidate, class count or count
  // but `pruned` (which depends on the order layouts reach the shard, so on
  // the thread count and timing). The same holds of another shard's bound
  // (its `top` better candidates or classes are kept there), so the least
  // any shard has reached (`shared`) serves too.
  double OwnBound(size_t top) const {
    return best.size() == top ? best.back().score.objective : std::numeric_limits<double>::infinity();
  }
  double PruneAbove(size_t top, const std::optional<double>& rank_objective, double shared) const {
    double bound = std::min(OwnBound(top), shared);
    if (rank_objective) bound = std::max(bound, *rank_objective);
    return bound;
  }
  void Offer(const Layout& layout, const LayoutScore& score, size_t top, bool distinct) {
    ScoredLayout candidate{Layout{}, score};
    if (distinct) {
      // `best` is sorted by class with one entry per class.
      auto at = std::lower_bound(best.begin(), best.end(), candidate, BetterClass);
      if (at != best.end() && !BetterClass(candidate, *at)) {
        // One class's members merged: the counts add up and the smaller
        // canonical text represents it.
        ++at->equivalents;
        if (FormatLayout(layout) < FormatLayout(at->layout)) at->layout = layout;
        return;
      }
      if (best.size() == top && at == best.end()) return;
      candidate.layout = layout;
      best.insert(at, std::move(candidate));
      if (best.size() > top) best.pop_back();
      return;
    }
    if (best.size() == top && !BetterThan(score, layout, best.back())) return;
    candidate.layout = layout;
    auto at = std::upper_bound(best.begin(), best.end(), candidate, Better);
    best.insert(at, std::move(candidate));
    if (best.size() > top) best.pop_back();
  }
};

// The least of the shards' own bounds (Shard::OwnBound), which every
// thread prunes by. It only falls, and is written only when a shard's
// worst kept candidate improves; read per family, on a line of its own.
struct alignas(64) SharedBound {
  std::atomic<double> objective{std::numeric_limits<double>::infinity()};
  double Get() const { return objective.load(std::memory_order_relaxed); }
  void Lower(double x) {
    double now = Get();
    while (x < now && !objective.compare_exchange_weak(now, x, std::memory_order_relaxed)) {
    }
  }
};

// What a scorer reports of a family's members, into one thread's shard:
// the memory rejections, the memory limit, pruning and the reference count
// as for a single layout; alike members counted at once.
class ShardSink : public ScoreSink {
 public:
  ShardSink(Shard* shard, SharedBound* shared, const SearchOptions& options, size_t top)
      : shard_(*shard), shared_(*shared), options_(options), top_(top) {}
  double PruneAbove() const override { return shard_.PruneAbove(top_, options_.rank_objective, shared_.Get()); }
  void Scored(const Layout& layout, const LayoutScore& score) override {
    if (Count(score, 1)) return;
    if (options_.rank_objective && score.objective < *options_.rank_objective) ++shard_.better;
    shard_.Offer(layout, score, top_, options_.distinct);
    shared_.Lower(shard_.OwnBound(top_));
  }
  void ScoredAlike(const LayoutScore& score, uint64_t count) override {
    [[maybe_unused]] const bool counted = Count(score, count);
    assert(counted && "ScoredAlike takes only scores that cannot rank (planner/scoring.h)");
  }

 private:
  // Counts a score that does not rank, `count` times; false for one that may.
  bool Count(const LayoutScore& score, uint64_t count) {
    shard_.scored += count;
    if (!score.fits) {
      shard_.rejected_memory += count;
      return true;
    }
    if (options_.max_peak_memory_gib && score.peak_memory_gib > *options_.max_peak_memory_gib) {
      shard_.over_limit += count;
      return true;
    }
    if (score.pruned) {
      // Its objective exceeds the bound (Shard::PruneAbove): it is not
      // below the reference, and Offer would not keep it.
      shard_.pruned += count;
      return true;
    }
    return false;
  }
  Shard& shard_;
  SharedBound& shared_;
  const SearchOptions& options_;
  size_t top_;
};

void Add(Enumeration* total, const Enumeration& part) {
  total->candidates += part.candidates;
  total->legal_count += part.legal_count;
  for (int r = 0; r < kRuleCount; ++r) total->rejected[r] += part.rejected[r];
}

}  // namespace

SearchResult SearchLayouts(const LegalityContext& ctx, const LayoutScorer& scorer,
                           const SearchOptions& options) {
  SearchResult result;
  const size_t top = static_cast<size_t>(std::max(options.top, 1));
  const int threads = std::clamp(options.threads, 1, kMaxSearchThreads);
  // One enumerator per thread. The work items of one (pp, tp, cp), which
  // differ in vpp and schedule, are claimed as one run (RunsOf) and walked a
  // family at a time, each family scored whole (ScoreFamily): the scorer's
  // per-thread caches of what depends on neither (compute times,
  // placements, the plans' per-layer ops) then meet their keys again while
  // they still hold them.
  std::vector<LayoutEnumerator> walkers;
  walkers.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) walkers.emplace_back(ctx, options.pins);
  const ItemRuns runs = RunsOf(walkers.front().Items());
  result.enumeration.world = walkers.front().world();
  std::vector<Shard> shards(static_cast<size_t>(threads));
  SharedBound shared_bound;
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  auto work = [&](size_t t) {
    ShardSink sink(&shards[t], &shared_bound, options, top);
    const FamilyVisitor score = [&](const LayoutFamily& family) { scorer.ScoreFamily(family, sink); };
    for (;;) {
      const size_t run = next.fetch_add(1);
      if (run >= runs.runs()) return;
      for (size_t i = runs.starts[run]; i < runs.starts[run + 1]; ++i) {
        walkers[t].RunFamilies(runs.items[i], &shards[t].counts, score);
      }
      done.fetch_add(runs.starts[run + 1] - runs.starts[run]);
    }
  };
  std::vector<std::thread> pool;
  // A thread the system refuses (std::system_error) is an error, not an
  // abort: the started ones are told there is no more work and joined.
  auto refused = [&](const std::system_error& e) {
    next.store(runs.runs());
    for (auto& t : pool) t.join();
    result.status = Status::Error("could not start scoring thread " + std::to_string(pool.size() + 1) + " of " +
                                  std::to_string(threads) + ": " + e.what() + " (try fewer --threads)");
    return result;
  };
  try {
    for (int t = 1; t < threads; ++t) pool.emplace_back(work, static_cast<size_t>(t));
    if (options.progress) {
      // The calling thread reports progress while the pool works, then helps.
      pool.emplace_back(work, size_t{0});
    }
  } catch (const std::system_error& e) {
    return refused(e);
  }
  if (options.progress) {
    // The fraction of work items done (items differ in size).
    while (done.load() < runs.items.size()) {
      options.progress(runs.items.empty() ? 1.0 : double(done.load()) / double(runs.items.size()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } else {
    work(0);
  }
  for (auto& t : pool) t.join();
  if (options.progress) options.progress(1.0);

  uint64_t rejected_memory = 0;
  for (auto& shard : shards) {
    Add(&result.enumeration, shard.counts);
    result.scored += shard.scored;
    rejected_memory += shard.rejected_memory;
    result.better_than_reference += shard.better;
    result.over_memory_limit += shard.over_limit;
    result.pruned += shard.pruned;
    for (auto& c : shard.best) {
      result.best.push_back(std::move(c));
    }
  }
  if (options.distinct) {
    std::sort(result.best.begin(), result.best.end(), [](const ScoredLayout& a, const ScoredLayout& b) {
      if (BetterClass(a, b) || BetterClass(b, a)) return BetterClass(a, b);
      return FormatLayout(a.layout) < FormatLayout(b.layout);
    });
    // A class kept by several shards is one candidate.
    std::vector<ScoredLayout> merged;
    for (auto& c : result.best) {
      if (!merged.empty() && !BetterClass(merged.back(), c)) {
        Merge(&merged.back(), std::move(c));
      } else {
        merged.push_back(std::move(c));
      }
    }
    result.best = std::move(merged);
  } else {
    std::sort(result.best.begin(), result.best.end(), Better);
  }
  if (result.best.size() > top) result.best.resize(top);
  result.enumeration.rejected[static_cast<size_t>(Rule::kFitsMemory)] += rejected_memory;
  result.enumeration.legal_count -= rejected_memory;
  return result;
}

}  // namespace foldplan
