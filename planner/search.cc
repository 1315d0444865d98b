#include "planner/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>

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
// A layout is copied only when it enters `best`.
struct Shard {
  std::vector<ScoredLayout> best;
  Enumeration counts;  // the thread's items' candidates and rejections
  uint64_t scored = 0;
  uint64_t rejected_memory = 0;
  uint64_t better = 0;  // below the reference objective
  uint64_t over_limit = 0;
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
  // One enumerator per thread; the items are claimed one at a time. Within
  // an item, layouts of equal degrees, order and placement come one after
  // another (they differ in options only: CP style, mbs and the recipe), so
  // a scorer's per-thread cache of what depends on the degrees alone (group
  // placement) stays warm.
  std::vector<LayoutEnumerator> walkers;
  walkers.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) walkers.emplace_back(ctx, options.pins);
  const std::vector<EnumerationItem> items = walkers.front().Items();
  result.enumeration.world = walkers.front().world();

  std::vector<Shard> shards(static_cast<size_t>(threads));
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  auto work = [&](size_t t) {
    Shard& shard = shards[t];
    const LayoutVisitor visit = [&](const Layout& layout) {
      ++shard.scored;
      const LayoutScore score = scorer.Score(layout);
      if (!score.fits) {
        ++shard.rejected_memory;
        return;
      }
      if (options.max_peak_memory_gib && score.peak_memory_gib > *options.max_peak_memory_gib) {
        ++shard.over_limit;
        return;
      }
      if (options.rank_objective && score.objective < *options.rank_objective) ++shard.better;
      shard.Offer(layout, score, top, options.distinct);
    };
    for (;;) {
      const size_t i = next.fetch_add(1);
      if (i >= items.size()) return;
      walkers[t].Run(items[i], &shard.counts, visit);
      done.fetch_add(1);
    }
  };
  std::vector<std::thread> pool;
  // A thread the system refuses (std::system_error) is an error, not an
  // abort: the started ones are told there is no more work and joined.
  auto refused = [&](const std::system_error& e) {
    next.store(items.size());
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
    while (done.load() < items.size()) {
      options.progress(items.empty() ? 1.0 : double(done.load()) / double(items.size()));
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
