// The streaming, threaded search against a straightforward reference:
// every legal layout collected, every one scored on one thread, sorted, the
// best taken. Over many seeded random jobs, clusters and pins, with any
// thread count, the two must agree exactly: the same ranked layouts with
// bit-equal scores and class sizes, and the same counts (candidates, every
// rule's rejections, scored, over the memory limit, below the reference),
// with the scorer pruning by a bound the search passes
// (LayoutScorer::ScoreBounded). The search walks families
// (planner/layout_family.h): their members are the layouts, in order.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "core/mix64.h"
#include "fixtures.h"
#include "planner/search.h"

using namespace foldplan;
using namespace foldplan::testing;

namespace {

// Scores from a hash of the canonical text, coarse so that many layouts tie
// on the objective (and on the whole class): the tie-breaks and `distinct`
// are exercised. About one layout in seven does not fit. Bounded, it
// prunes by a valid bound: the objective less a drawn slack of 0 to 0.375
// (0: the bound is the objective, so ties with the search's bound are met).
class HashScorer : public LayoutScorer {
 public:
  LayoutScore Score(const Layout& l) const override { return ScoreOf(Hash(l)); }
  LayoutScore ScoreBounded(const Layout& l, double prune_above) const override {
    const uint64_t h = Hash(l);
    LayoutScore s = ScoreOf(h);
    if (!s.fits) return s;
    const double bound = s.objective - double((h >> 32) % 4) * 0.125;
    if (bound > prune_above) {
      // What the contract promises and no more.
      s.pruned = true;
      s.objective = 0;
      s.step_time_s = 0;
      pruned_.fetch_add(1);
    }
    return s;
  }
  uint64_t pruned() const { return pruned_.load(); }

 private:
  static uint64_t Hash(const Layout& l) {
    const std::string text = FormatLayout(l);
    uint64_t h = 0;
    for (char c : text) h = Mix64(h ^ static_cast<unsigned char>(c));
    return h;
  }
  static LayoutScore ScoreOf(uint64_t h) {
    LayoutScore s;
    s.fits = h % 7 != 0;
    s.objective = 1.0 + double((h >> 8) % 13) * 0.125;
    s.step_time_s = s.objective + double((h >> 16) % 3) * 0.5;
    s.peak_memory_gib = double((h >> 24) % 5) * 10.0;
    return s;
  }
  mutable std::atomic<uint64_t> pruned_{0};
};

bool BetterRef(const ScoredLayout& a, const ScoredLayout& b, bool distinct) {
  if (a.score.objective != b.score.objective) return a.score.objective < b.score.objective;
  if (a.score.step_time_s != b.score.step_time_s) return a.score.step_time_s < b.score.step_time_s;
  if (distinct && a.score.peak_memory_gib != b.score.peak_memory_gib) {
    return a.score.peak_memory_gib < b.score.peak_memory_gib;
  }
  return FormatLayout(a.layout) < FormatLayout(b.layout);
}

bool SameClass(const LayoutScore& a, const LayoutScore& b) {
  return a.objective == b.objective && a.step_time_s == b.step_time_s && a.peak_memory_gib == b.peak_memory_gib;
}

// Enumerate everything, score everything, sort, take the best.
SearchResult ReferenceSearch(const LegalityContext& ctx, const LayoutScorer& scorer, const SearchOptions& options) {
  SearchResult r;
  EnumerateOptions enumerate;
  enumerate.pins = options.pins;
  r.enumeration = EnumerateLayouts(ctx, enumerate);
  std::vector<ScoredLayout> fitting;
  uint64_t not_fitting = 0;
  for (const Layout& l : r.enumeration.legal) {
    const LayoutScore s = scorer.Score(l);
    if (!s.fits) {
      ++not_fitting;
      continue;
    }
    if (options.max_peak_memory_gib && s.peak_memory_gib > *options.max_peak_memory_gib) {
      ++r.over_memory_limit;
      continue;
    }
    if (options.rank_objective && s.objective < *options.rank_objective) ++r.better_than_reference;
    fitting.push_back({l, s});
  }
  r.scored = r.enumeration.legal.size();
  r.enumeration.legal.clear();
  r.enumeration.rejected[static_cast<size_t>(Rule::kFitsMemory)] += not_fitting;
  r.enumeration.legal_count -= not_fitting;
  std::sort(fitting.begin(), fitting.end(),
            [&](const ScoredLayout& a, const ScoredLayout& b) { return BetterRef(a, b, options.distinct); });
  if (options.distinct) {
    // Sorted by class, then text: the first of each class represents it.
    std::vector<ScoredLayout> classes;
    for (const ScoredLayout& c : fitting) {
      if (!classes.empty() && SameClass(classes.back().score, c.score)) {
        ++classes.back().equivalents;
      } else {
        classes.push_back(c);
      }
    }
    fitting = std::move(classes);
  }
  if (fitting.size() > static_cast<size_t>(options.top)) fitting.resize(static_cast<size_t>(options.top));
  r.best = std::move(fitting);
  return r;
}

// A seeded draw.
struct Draw {
  uint64_t state;
  uint64_t Next() { return Mix64(state += kSplitMix64Increment); }
  int Below(int n) { return static_cast<int>(Next() % static_cast<uint64_t>(n)); }
  bool Coin() { return Next() & 1; }
  // A non-empty subset of `all`, in its order.
  template <class T>
  std::vector<T> Subset(const std::vector<T>& all) {
    std::vector<T> out;
    for (const T& v : all) {
      if (Coin()) out.push_back(v);
    }
    if (out.empty()) out.push_back(all[static_cast<size_t>(Below(static_cast<int>(all.size())))]);
    return out;
  }
};

struct ReferenceCase {
  ClusterSpec cluster;
  ModelSpec model;
  JobSpec job;
  LayoutPins pins;
  SearchOptions options;
};

ReferenceCase RandomCase(uint64_t seed) {
  Draw d{seed};
  ReferenceCase c;
  const int gpus_per_node = d.Coin() ? 8 : 4;
  const int domain = gpus_per_node * (1 + d.Below(2));  // one or two nodes per NVLink domain
  c.cluster = MakeCluster(1 << d.Below(4), gpus_per_node, domain);
  c.model = d.Below(4) == 0 ? MakeDense() : MakeMixtral();
  JobSpec& j = c.job;
  j = MakeJob();
  j.global_batch = std::vector<int>{16, 64, 256}[static_cast<size_t>(d.Below(3))];
  j.micro_batch_sizes = d.Subset<int>({1, 2, 4});
  j.vpp = d.Subset<int>({1, 2, 4});
  j.cp_styles = d.Subset<CpStyle>({CpStyle::kUlysses, CpStyle::kRing});
  j.orders = d.Subset<std::string>({"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-ep-cp-dp-pp", "cp-tp-ep-dp-pp",
                                    "tp-dp-cp-ep-pp", "ep-tp-cp-dp-pp"});
  j.recompute = d.Subset<Recompute>({Recompute::None(), Recompute::Selective(), Recompute::Full()});
  j.dispatchers = d.Subset<Dispatcher>({Dispatcher::kAllToAll, Dispatcher::kDeepEP, Dispatcher::kHybridEP});
  j.a2a_overlap = d.Subset<bool>({false, true});
  // bf16 always (MXFP8 alone would leave nothing legal on Hopper).
  j.precisions = {Precision::kBF16};
  if (d.Coin()) j.precisions.push_back(Precision::kFP8Tensorwise);
  if (d.Coin()) j.precisions.push_back(Precision::kMXFP8);
  j.fsdp = d.Subset<bool>({false, true});
  j.tp_overlap = d.Subset<bool>({false, true});
  if (d.Coin()) {
    j.pipeline_schedules = d.Subset<PipelineSchedule>(
        {PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B, PipelineSchedule::kZeroBubbleH1});
  }
  // Sometimes fewer GPUs than the cluster has, sometimes more (every
  // candidate then breaks world_fits_cluster).
  const int pick = d.Below(6);
  if (pick == 0) j.world_size = c.cluster.total_gpus() / 2;
  if (pick == 1) j.world_size = c.cluster.total_gpus() * 2;
  const std::vector<std::string> pin_texts = {"", "", "", "tp=2", "pp=2", "placement=packed", "ep=4,etp=1"};
  const std::string pin_text = pin_texts[static_cast<size_t>(d.Below(static_cast<int>(pin_texts.size())))];
  if (!pin_text.empty()) c.pins = ParseLayoutPins(pin_text).value();
  j = PinnedJob(j, c.pins);
  c.options.top = 1 + d.Below(12);
  c.options.distinct = d.Coin();
  if (d.Coin()) c.options.max_peak_memory_gib = 25.0;
  if (d.Coin()) c.options.rank_objective = 1.5;
  return c;
}

void CheckSame(const SearchResult& got, const SearchResult& want) {
  CHECK(got.status.ok());
  CHECK(got.enumeration.world == want.enumeration.world);
  CHECK(got.enumeration.candidates == want.enumeration.candidates);
  CHECK(got.enumeration.legal_count == want.enumeration.legal_count);
  for (int r = 0; r < kRuleCount; ++r) {
    CAPTURE(Name(Rule(r)));
    CHECK(got.enumeration.rejected[static_cast<size_t>(r)] == want.enumeration.rejected[static_cast<size_t>(r)]);
  }
  CHECK(got.scored == want.scored);
  CHECK(got.over_memory_limit == want.over_memory_limit);
  CHECK(got.better_than_reference == want.better_than_reference);
  REQUIRE(got.best.size() == want.best.size());
  for (size_t i = 0; i < got.best.size(); ++i) {
    CAPTURE(i);
    CHECK(FormatLayout(got.best[i].layout) == FormatLayout(want.best[i].layout));
    CHECK(got.best[i].layout == want.best[i].layout);
    // Bit-equal scores, not merely close ones.
    CHECK(std::memcmp(&got.best[i].score.objective, &want.best[i].score.objective, sizeof(double)) == 0);
    CHECK(std::memcmp(&got.best[i].score.step_time_s, &want.best[i].score.step_time_s, sizeof(double)) == 0);
    CHECK(std::memcmp(&got.best[i].score.peak_memory_gib, &want.best[i].score.peak_memory_gib, sizeof(double)) == 0);
    CHECK(got.best[i].equivalents == want.best[i].equivalents);
  }
}

}  // namespace

TEST_CASE("the streaming search equals enumerate-all-then-score-all on random jobs, for any thread count") {
  HashScorer scorer;
  constexpr uint64_t kSeeds = 200;
  int with_legal = 0, over_cluster = 0, ranked_ties = 0;
  uint64_t reported_pruned = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    CAPTURE(seed);
    ReferenceCase c = RandomCase(seed);
    const LegalityContext ctx{&c.cluster, &c.model, &c.job};
    c.options.pins = &c.pins;
    const SearchResult want = ReferenceSearch(ctx, scorer, c.options);
    with_legal += want.scored > 0;
    over_cluster += want.enumeration.rejected[static_cast<size_t>(Rule::kWorldFitsCluster)] > 0;
    for (size_t i = 1; i < want.best.size(); ++i) {
      ranked_ties += want.best[i].score.objective == want.best[i - 1].score.objective;
    }
    for (int threads : {1, 2, 3, 8}) {
      CAPTURE(threads);
      SearchOptions options = c.options;
      options.threads = threads;
      const SearchResult got = SearchLayouts(ctx, scorer, options);
      CheckSame(got, want);
      CHECK(got.pruned <= got.scored);
      reported_pruned += got.pruned;
    }
  }
  // Pruning ran (its results are checked above like every other's), and
  // the search counted what the scorer pruned within the memory limit.
  CHECK(scorer.pruned() > 0);
  CHECK(reported_pruned > 0);
  CHECK(reported_pruned <= scorer.pruned());
  // The draws reach what they are meant to test.
  CHECK(with_legal > int(kSeeds / 3));
  CHECK(over_cluster > 0);
  CHECK(ranked_ties > 0);
}

TEST_CASE("work items run in any order on one enumerator count and visit what EnumerateLayouts does") {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    ReferenceCase c = RandomCase(seed);
    const LegalityContext ctx{&c.cluster, &c.model, &c.job};
    EnumerateOptions all_options;
    all_options.pins = &c.pins;
    const Enumeration all = EnumerateLayouts(ctx, all_options);
    std::multiset<std::string> want;
    for (const Layout& l : all.legal) want.insert(FormatLayout(l));
    LayoutEnumerator walker(ctx, &c.pins);
    std::vector<EnumerationItem> items = walker.Items();
    std::reverse(items.begin(), items.end());  // the per-pp and stage caches see pp change back and forth
    Enumeration counts;
    std::multiset<std::string> got;
    for (const EnumerationItem& item : items) {
      walker.Run(item, &counts, [&](const Layout& l) { got.insert(FormatLayout(l)); });
    }
    CHECK(counts.candidates == all.candidates);
    CHECK(counts.legal_count == all.legal_count);
    CHECK(counts.rejected == all.rejected);
    CHECK(counts.legal.empty());
    CHECK(got == want);
  }
}

TEST_CASE("RunsOf holds every work item once, in runs of one (pp, tp, cp) ordered by it, each run in item order") {
  size_t longest = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    ReferenceCase c = RandomCase(seed);
    const LegalityContext ctx{&c.cluster, &c.model, &c.job};
    LayoutEnumerator walker(ctx, &c.pins);
    const std::vector<EnumerationItem> items = walker.Items();
    const ItemRuns runs = RunsOf(items);
    auto key = [](const EnumerationItem& i) { return std::make_tuple(i.pp, i.vpp, i.schedule, i.tp, i.cp); };
    auto run_of = [](const EnumerationItem& i) { return std::make_tuple(i.pp, i.tp, i.cp); };
    // Each item once (items are distinct: one per pp, vpp, schedule, tp, cp).
    std::map<std::tuple<int, int, size_t, int, int>, size_t> at;  // an item's index in Items()
    for (size_t i = 0; i < items.size(); ++i) at[key(items[i])] = i;
    REQUIRE(at.size() == items.size());
    std::set<std::tuple<int, int, size_t, int, int>> seen;
    REQUIRE(runs.items.size() == items.size());
    REQUIRE(!runs.starts.empty());
    CHECK(runs.starts.front() == 0);
    CHECK(runs.starts.back() == items.size());
    for (size_t r = 0; r < runs.runs(); ++r) {
      const size_t begin = runs.starts[r], end = runs.starts[r + 1];
      REQUIRE(begin < end);
      longest = std::max(longest, end - begin);
      if (r > 0) CHECK(run_of(runs.items[runs.starts[r - 1]]) < run_of(runs.items[begin]));
      for (size_t i = begin; i < end; ++i) {
        REQUIRE(at.count(key(runs.items[i])) == 1);
        CHECK(seen.insert(key(runs.items[i])).second);
        CHECK(run_of(runs.items[i]) == run_of(runs.items[begin]));
        if (i > begin) CHECK(at.at(key(runs.items[i - 1])) < at.at(key(runs.items[i])));
      }
    }
    CHECK(seen.size() == items.size());
  }
  CHECK(longest > 1);  // some runs hold several vpp or schedules
}

TEST_CASE("a work item walked a family at a time has the layouts, order and counts of walking it layout by layout") {
  int families = 0, multi_arrangement = 0, hybrid_split = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    CAPTURE(seed);
    ReferenceCase c = RandomCase(seed);
    const LegalityContext ctx{&c.cluster, &c.model, &c.job};
    LayoutEnumerator by_layout(ctx, &c.pins);
    LayoutEnumerator by_family(ctx, &c.pins);
    for (const EnumerationItem& item : by_layout.Items()) {
      Enumeration want_counts, got_counts;
      std::vector<Layout> want, got;
      by_layout.Run(item, &want_counts, [&](const Layout& l) { want.push_back(l); });
      by_family.RunFamilies(item, &got_counts, [&](const LayoutFamily& f) {
        ++families;
        multi_arrangement += f.arrangements.size() > 1;
        CHECK(f.size() > 0);
        uint64_t members = 0;
        f.ForEachMember([&](const Layout& l) {
          ++members;
          // The shared fields are the base's.
          CHECK(l.pp == f.base.pp);
          CHECK(l.vpp == f.base.vpp);
          CHECK(l.schedule == f.base.schedule);
          CHECK(l.stage_layers == f.base.stage_layers);
          CHECK(l.tp == f.base.tp);
          CHECK(l.cp == f.base.cp);
          CHECK(l.dp == f.base.dp);
          CHECK(l.ep == f.base.ep);
          CHECK(l.etp == f.base.etp);
          CHECK(l.edp == f.base.edp);
          CHECK(l.mbs == f.base.mbs);
          CHECK(l.cp_style == f.base.cp_style);
          got.push_back(l);
        });
        CHECK(members == f.size());
        for (size_t v = 0; v < f.variants.size(); ++v) {
          hybrid_split += f.MembersOf(v) > 0 && f.MembersOf(v) < f.arrangements.size();
        }
      });
      CHECK(got_counts.candidates == want_counts.candidates);
      CHECK(got_counts.legal_count == want_counts.legal_count);
      CHECK(got_counts.rejected == want_counts.rejected);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == want[i]);
    }
  }
  CHECK(families > 0);
  CHECK(multi_arrangement > 0);
  CHECK(hybrid_split > 0);  // some variant legal under some arrangements only
}
