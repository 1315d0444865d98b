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

bool Better(const ScoredLayout& a, const ScoredLayout& b) {
  if (a.score.objective != b.score.objective) return a.score.objective < b.score.objective;
  if (a.score.step_time_s != b.score.step_time_s) return a.score.step_time_s < b.score.step_time_s;
  return FormatLayout(a.layout) < FormatLayout(b.layout);
}

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

// Keeps the best `top` of what one thread scores.
struct Shard {
  std::vector<ScoredLayout> best;
  uint64_t rejected_memory = 0;
  uint64_t better = 0;  // below the reference objective
  uint64_t over_limit = 0;
  void Offer(ScoredLayout candidate, size_t top, bool distinct) {
    if (distinct) {
      // `best` is sorted by class with one entry per class.
      auto at = std::lower_bound(best.begin(), best.end(), candidate, BetterClass);
      if (at != best.end() && !BetterClass(candidate, *at)) return Merge(&*at, std::move(candidate));
      if (best.size() == top && at == best.end()) return;
      best.insert(at, std::move(candidate));
      if (best.size() > top) best.pop_back();
      return;
    }
    if (best.size() == top && !Better(candidate, best.back())) return;
    auto at = std::upper_bound(best.begin(), best.end(), candidate, Better);
    best.insert(at, std::move(candidate));
    if (best.size() > top) best.pop_back();
  }
};

}  // namespace

SearchResult SearchLayouts(const LegalityContext& ctx, const LayoutScorer& scorer,
                           const SearchOptions& options) {
  SearchResult result;
  EnumerateOptions enumerate;
  enumerate.pins = options.pins;
  result.enumeration = EnumerateLayouts(ctx, enumerate);
  const std::vector<Layout>& legal = result.enumeration.legal;
  // Score layouts with equal degrees, order and placement one after another:
  // they differ only in options (vpp and its stages, mbs, CP style and the
  // recipe: recompute, dispatcher, EP overlap, precision, FSDP, TP overlap),
  // and a scorer can reuse what depends on the degrees alone (group placement).
  std::vector<size_t> by_degrees(legal.size());
  for (size_t i = 0; i < by_degrees.size(); ++i) by_degrees[i] = i;
  auto key = [&](size_t i) {
    const Layout& l = legal[i];
    return std::tie(l.pp, l.tp, l.cp, l.ep, l.etp, l.order, l.placement);
  };
  std::stable_sort(by_degrees.begin(), by_degrees.end(),
                   [&](size_t a, size_t b) { return key(a) < key(b); });
  const size_t top = static_cast<size_t>(std::max(options.top, 1));
  const int threads = std::clamp(options.threads, 1, kMaxSearchThreads);

  std::vector<Shard> shards(static_cast<size_t>(threads));
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  constexpr size_t kChunk = 256;  // layouts claimed per grab
  auto work = [&](Shard* shard) {
    for (;;) {
      const size_t begin = next.fetch_add(kChunk);
      if (begin >= legal.size()) return;
      const size_t end = std::min(begin + kChunk, legal.size());
      for (size_t i = begin; i < end; ++i) {
        const Layout& layout = legal[by_degrees[i]];
        LayoutScore score = scorer.Score(layout);
        if (!score.fits) {
          ++shard->rejected_memory;
          continue;
        }
        if (options.max_peak_memory_gib && score.peak_memory_gib > *options.max_peak_memory_gib) {
          ++shard->over_limit;
          continue;
        }
        if (options.rank_objective && score.objective < *options.rank_objective) ++shard->better;
        shard->Offer({layout, score}, top, options.distinct);
      }
      done.fetch_add(end - begin);
    }
  };
  std::vector<std::thread> pool;
  // A thread the system refuses (std::system_error) is an error, not an
  // abort: the started ones are told there is no more work and joined.
  auto refused = [&](const std::system_error& e) {
    next.store(legal.size());
    for (auto& t : pool) t.join();
    result.status = Status::Error("could not start scoring thread " + std::to_string(pool.size() + 1) + " of " +
                                  std::to_string(threads) + ": " + e.what() + " (try fewer --threads)");
    return result;
  };
  try {
    for (int t = 1; t < threads; ++t) pool.emplace_back(work, &shards[static_cast<size_t>(t)]);
    if (options.progress) {
      // The calling thread reports progress while the pool works, then helps.
      pool.emplace_back(work, &shards[0]);
    }
  } catch (const std::system_error& e) {
    return refused(e);
  }
  if (options.progress) {
    while (done.load() < legal.size()) {
      options.progress(legal.empty() ? 1.0 : double(done.load()) / double(legal.size()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } else {
    work(&shards[0]);
  }
  for (auto& t : pool) t.join();
  if (options.progress) options.progress(1.0);

  uint64_t rejected_memory = 0;
  for (auto& shard : shards) {
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
  result.scored = legal.size();
  result.enumeration.rejected[static_cast<size_t>(Rule::kFitsMemory)] += rejected_memory;
  result.enumeration.legal_count -= rejected_memory;
  return result;
}

}  // namespace foldplan
