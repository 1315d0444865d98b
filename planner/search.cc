#include "planner/search.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <chrono>
#include <limits>
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
  // the thread count and timing).
  double PruneAbove(size_t top, const std::optional<double>& rank_objective) const {
    double bound = best.size() == top ? best.back().score.objective : std::numeric_limits<double>::infinity();
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

// The legal layouts of a run of work items that share pp and tp (one per
// vpp and schedule), held compactly until the run ends, then handed on
// grouped by degrees, order and placement (enumeration varies the order
// inside the micro-batch loop and vpp outside tp): a scorer's per-thread
// cache of what depends on those alone (group placement) then misses once
// per group, as when the whole legal set was sorted. Every layout of one
// item shares its pp, vpp, schedule, tp and stages (planner/enumerate.h),
// kept once per item; an entry holds the rest, the order as an index. The
// buffer holds at most SearchOptions::buffered_layouts entries (48 B each)
// and flushes when full: memory does not grow with the search, and a group
// then costs a second miss only in runs that large.
class ItemBuffer {
 public:
  ItemBuffer(const LayoutVisitor* visit, size_t capacity) : visit_(visit), capacity_(std::max<size_t>(capacity, 1)) {}
  void BeginItem() { new_item_ = true; }
  void Add(const Layout& l) {
    if (entries_.size() >= capacity_) {
      Flush();
      new_item_ = true;  // the item goes on: its base again
    }
    if (new_item_) {
      bases_.push_back(l);
      new_item_ = false;
    }
    uint16_t order = 0;
    while (order < orders_.size() && orders_[order] != l.order) ++order;
    if (order == orders_.size()) orders_.push_back(l.order);
    entries_.push_back({l.cp, l.dp, l.ep, l.etp, l.edp, l.mbs, static_cast<uint32_t>(bases_.size() - 1),
                        l.recompute, order, Small(l.placement), Small(l.cp_style), Small(l.dispatcher),
                        Small(l.precision), l.a2a_overlap, l.fsdp, l.tp_overlap});
  }
  // Calls the visitor with each layout held, grouped, and empties the buffer.
  void Flush() {
    const LayoutVisitor& visit = *visit_;
    auto key = [](const Entry& e) { return std::tie(e.cp, e.ep, e.etp, e.order, e.placement, e.base); };
    std::sort(entries_.begin(), entries_.end(), [&](const Entry& a, const Entry& b) { return key(a) < key(b); });
    Layout l;
    uint32_t base = UINT32_MAX;
    for (const Entry& e : entries_) {
      if (e.base != base) {
        base = e.base;
        l = bases_[base];
      }
      l.cp = e.cp, l.dp = e.dp, l.ep = e.ep, l.etp = e.etp, l.edp = e.edp, l.mbs = e.mbs;
      l.order = orders_[e.order];
      l.placement = static_cast<Placement>(e.placement);
      l.cp_style = static_cast<CpStyle>(e.cp_style);
      l.recompute = e.recompute;
      l.dispatcher = static_cast<Dispatcher>(e.dispatcher);
      l.a2a_overlap = e.a2a_overlap;
      l.precision = static_cast<Precision>(e.precision);
      l.fsdp = e.fsdp;
      l.tp_overlap = e.tp_overlap;
      visit(l);
    }
    entries_.clear();
    bases_.clear();
  }

 private:
  // The enums in a byte each: 48 bytes an entry.
  template <class E>
  static uint8_t Small(E e) {
    return static_cast<uint8_t>(e);
  }
  struct Entry {
    int cp, dp, ep, etp, edp, mbs;
    uint32_t base;  // index into bases_: the item's pp, vpp, schedule, tp and stages
    Recompute recompute;
    uint16_t order;  // index into orders_ (a job may list hundreds of orders)
    uint8_t placement, cp_style, dispatcher, precision;
    bool a2a_overlap, fsdp, tp_overlap;
  };
  static_assert(sizeof(Entry) <= 48);
  const LayoutVisitor* visit_;
  size_t capacity_;
  bool new_item_ = true;
  std::vector<Layout> bases_;        // one layout per item of the run
  std::vector<std::string> orders_;  // the orders seen, a few
  std::vector<Entry> entries_;
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
  // One enumerator per thread; the runs of items of one (pp, tp) are
  // claimed one at a time, each buffered and scored grouped by degrees,
  // order and placement (ItemBuffer).
  std::vector<LayoutEnumerator> walkers;
  walkers.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) walkers.emplace_back(ctx, options.pins);
  const std::vector<EnumerationItem> items = walkers.front().Items();
  result.enumeration.world = walkers.front().world();
  // Runs of items of one (pp, tp), claimed whole (ItemBuffer).
  std::vector<size_t> by_pp_tp(items.size());
  for (size_t i = 0; i < items.size(); ++i) by_pp_tp[i] = i;
  std::stable_sort(by_pp_tp.begin(), by_pp_tp.end(), [&](size_t a, size_t b) {
    return std::tie(items[a].pp, items[a].tp) < std::tie(items[b].pp, items[b].tp);
  });
  std::vector<size_t> run_starts;  // into by_pp_tp, and its end last
  for (size_t i = 0; i < by_pp_tp.size(); ++i) {
    const EnumerationItem& a = items[by_pp_tp[i]];
    if (i == 0 || a.pp != items[by_pp_tp[i - 1]].pp || a.tp != items[by_pp_tp[i - 1]].tp) run_starts.push_back(i);
  }
  const size_t runs = run_starts.size();
  run_starts.push_back(by_pp_tp.size());

  std::vector<Shard> shards(static_cast<size_t>(threads));
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  auto work = [&](size_t t) {
    Shard& shard = shards[t];
    const LayoutVisitor score_one = [&](const Layout& layout) {
      ++shard.scored;
      const LayoutScore score = scorer.ScoreBounded(layout, shard.PruneAbove(top, options.rank_objective));
      if (!score.fits) {
        ++shard.rejected_memory;
        return;
      }
      if (options.max_peak_memory_gib && score.peak_memory_gib > *options.max_peak_memory_gib) {
        ++shard.over_limit;
        return;
      }
      if (score.pruned) {
        // Its objective exceeds the bound (Shard::PruneAbove): it is not
        // below the reference, and Offer would not keep it.
        ++shard.pruned;
        return;
      }
      if (options.rank_objective && score.objective < *options.rank_objective) ++shard.better;
      shard.Offer(layout, score, top, options.distinct);
    };
    ItemBuffer buffer(&score_one, options.buffered_layouts);
    const LayoutVisitor hold = [&](const Layout& layout) { buffer.Add(layout); };
    for (;;) {
      const size_t run = next.fetch_add(1);
      if (run >= runs) return;
      for (size_t i = run_starts[run]; i < run_starts[run + 1]; ++i) {
        buffer.BeginItem();
        walkers[t].Run(items[by_pp_tp[i]], &shard.counts, hold);
      }
      buffer.Flush();
      done.fetch_add(run_starts[run + 1] - run_starts[run]);
    }
  };
  std::vector<std::thread> pool;
  // A thread the system refuses (std::system_error) is an error, not an
  // abort: the started ones are told there is no more work and joined.
  auto refused = [&](const std::system_error& e) {
    next.store(runs);
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
