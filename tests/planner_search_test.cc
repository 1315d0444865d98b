// SearchLayouts with a scorer written for the test: the best are ranked by
// the objective, layouts that do not fit are counted, nothing illegal is
// ranked, and the result does not depend on the number of threads.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <tuple>

#include "fixtures.h"
#include "planner/search.h"
#include "under_sanitizer.h"

using namespace foldplan;
using namespace foldplan::testing;

namespace {

// Objective: a made-up function of the degrees; "does not fit" when tp == 1
// and pp == 1 (as if the whole model sat on one GPU).
class ToyScorer : public LayoutScorer {
 public:
  LayoutScore Score(const Layout& l) const override {
    ++calls;
    LayoutScore s;
    s.fits = !(l.tp == 1 && l.pp == 1);
    s.step_time_s = 1.0 / (l.tp * 0.9 + l.ep * 1.1 + l.mbs) + 0.01 * l.pp + 0.001 * l.vpp;
    s.objective = s.step_time_s;
    return s;
  }
  mutable std::atomic<int> calls{0};
};

}  // namespace

TEST_CASE("the search ranks legal, fitting layouts by objective") {
  ClusterSpec cluster = MakeCluster(4);
  ModelSpec model = MakeMixtral();
  JobSpec job = MakeJob();
  const LegalityContext ctx{&cluster, &model, &job};
  ToyScorer scorer;
  const SearchResult r = SearchLayouts(ctx, scorer, {.top = 7, .threads = 2});
  REQUIRE(r.best.size() == 7);
  CHECK(scorer.calls == static_cast<int>(r.scored));
  for (size_t i = 1; i < r.best.size(); ++i) {
    CHECK(r.best[i - 1].score.objective <= r.best[i].score.objective);
  }
  for (const auto& b : r.best) {
    CHECK(CheckLayout(b.layout, ctx).empty());  // illegal layouts are never ranked
    CHECK(b.score.fits);
  }
  // Every legal layout was either kept as fitting or counted under fits_memory.
  const Enumeration all = EnumerateLayouts(ctx);
  uint64_t not_fitting = 0;
  for (const auto& l : all.legal) not_fitting += (l.tp == 1 && l.pp == 1);
  CHECK(r.enumeration.rejected[static_cast<size_t>(Rule::kFitsMemory)] == not_fitting);
  CHECK(r.enumeration.legal_count == all.legal_count - not_fitting);
  CHECK(r.enumeration.candidates == all.candidates);
}

TEST_CASE("one thread and two threads give the same ranking") {
  ClusterSpec cluster = MakeCluster(16);
  ModelSpec model = MakeMixtral();
  JobSpec job = MakeJob();
  const LegalityContext ctx{&cluster, &model, &job};
  ToyScorer scorer;
  const SearchResult one = SearchLayouts(ctx, scorer, {.top = 20, .threads = 1});
  const SearchResult two = SearchLayouts(ctx, scorer, {.top = 20, .threads = 2});
  REQUIRE(one.best.size() == two.best.size());
  for (size_t i = 0; i < one.best.size(); ++i) CHECK(one.best[i].layout == two.best[i].layout);
}

TEST_CASE("progress is reported and reaches 1") {
  ClusterSpec cluster = MakeCluster(4);
  ModelSpec model = MakeMixtral();
  JobSpec job = MakeJob();
  ToyScorer scorer;
  double last = -1;
  SearchOptions options;
  options.progress = [&](double f) {
    CHECK(f >= last);
    last = f;
  };
  SearchLayouts({&cluster, &model, &job}, scorer, options);
  CHECK(last == 1.0);
}

// Under AddressSanitizer a capped address space fails ASan's own mappings
// (each thread's fake stack) before pthread_create can, and that is fatal
// by design; the Release suite runs this test, the sanitized one skips it
// (kUnderAsan, under_sanitizer.h).

// Regression: --threads 100000 aborted on an uncaught std::system_error. The
// threads are held to kMaxSearchThreads, and a thread the system refuses is
// an error in the result. The refusal is provoked in a child process whose
// address space has no room for the threads' stacks.
TEST_CASE("a scoring thread the system refuses is an error, not an abort" * doctest::skip(kUnderAsan)) {
  ClusterSpec cluster = MakeCluster(4);
  ModelSpec model = MakeMixtral();
  JobSpec job = MakeJob();
  const LegalityContext ctx{&cluster, &model, &job};
  ToyScorer scorer;
  const Enumeration all = EnumerateLayouts(ctx);  // the search enumerates the same before any thread
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    rlimit limit{};
    ::getrlimit(RLIMIT_AS, &limit);
    // About what the process maps now plus 64 MiB: a few 8 MiB stacks.
    std::ifstream statm("/proc/self/statm");
    unsigned long pages = 0;
    statm >> pages;
    limit.rlim_cur = pages * static_cast<unsigned long>(::sysconf(_SC_PAGESIZE)) + (64ul << 20);
    ::setrlimit(RLIMIT_AS, &limit);
    const SearchResult r = SearchLayouts(ctx, scorer, {.top = 3, .threads = kMaxSearchThreads});
    const bool reported = !r.status.ok() && r.best.empty() &&
                          r.status.message().find("could not start scoring thread") == 0;
    ::_exit(reported ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK_MESSAGE(WIFEXITED(status), "the child died of signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(all.legal_count > 0);
}

TEST_CASE("more threads than the bound run as the bound, with the same ranking") {
  ClusterSpec cluster = MakeCluster(4);
  ModelSpec model = MakeMixtral();
  JobSpec job = MakeJob();
  const LegalityContext ctx{&cluster, &model, &job};
  ToyScorer scorer;
  const SearchResult many = SearchLayouts(ctx, scorer, {.top = 5, .threads = 100000});
  const SearchResult one = SearchLayouts(ctx, scorer, {.top = 5, .threads = 1});
  REQUIRE(many.status.ok());
  REQUIRE(many.best.size() == one.best.size());
  for (size_t i = 0; i < one.best.size(); ++i) CHECK(one.best[i].layout == many.best[i].layout);
}

namespace {

// A score that ignores the order, placement and recompute (as if they could
// not change cost), so the layouts that differ only there form one class;
// peak memory grows with mbs and falls with tp.
class CoarseScorer : public LayoutScorer {
 public:
  LayoutScore Score(const Layout& l) const override {
    LayoutScore s;
    s.step_time_s = 1.0 / (l.tp * 0.9 + l.ep * 1.1 + l.mbs) + 0.01 * l.pp + 0.001 * l.vpp;
    s.peak_memory_gib = 10.0 * l.mbs / l.tp;
    s.objective = s.step_time_s;
    return s;
  }
};

// What the scorer treats as equal: the class key.
std::tuple<double, double, double> ClassOf(const LayoutScore& s) {
  return {s.objective, s.step_time_s, s.peak_memory_gib};
}

}  // namespace

TEST_CASE("--distinct keeps one layout per score class, with the exact size of each class") {
  ClusterSpec cluster = MakeCluster(4);
  ModelSpec model = MakeMixtral();
  JobSpec job = MakeJob();
  // The job's three recompute candidates: every class has at least 3 layouts.
  REQUIRE(job.recompute.size() == 3);
  const LegalityContext ctx{&cluster, &model, &job};
  CoarseScorer scorer;
  // Brute force: every legal layout's class and its size.
  const Enumeration all = EnumerateLayouts(ctx);
  std::map<std::tuple<double, double, double>, uint64_t> sizes;
  for (const Layout& l : all.legal) ++sizes[ClassOf(scorer.Score(l))];
  REQUIRE(sizes.size() > 6);
  for (int threads : {1, 3}) {
    CAPTURE(threads);
    const SearchResult r = SearchLayouts(ctx, scorer, {.top = 6, .threads = threads, .distinct = true});
    REQUIRE(r.best.size() == 6);
    auto expected = sizes.begin();  // the classes in (objective, step, peak) order
    for (const ScoredLayout& b : r.best) {
      CHECK(ClassOf(b.score) == expected->first);
      CHECK(b.equivalents == expected->second);
      CHECK(b.equivalents >= 3);
      ++expected;
    }
  }
}

TEST_CASE("a memory limit refuses exactly the fitting layouts over it and counts them") {
  ClusterSpec cluster = MakeCluster(4);
  ModelSpec model = MakeMixtral();
  JobSpec job = MakeJob();
  const LegalityContext ctx{&cluster, &model, &job};
  CoarseScorer scorer;
  const double limit = 10.0;  // mbs 1 at any tp, mbs 2 only at tp >= 2
  const Enumeration all = EnumerateLayouts(ctx);
  uint64_t over = 0;
  for (const Layout& l : all.legal) over += scorer.Score(l).peak_memory_gib > limit;
  REQUIRE(over > 0);
  const SearchResult r = SearchLayouts(ctx, scorer, {.top = 50, .threads = 2, .max_peak_memory_gib = limit});
  CHECK(r.over_memory_limit == over);
  REQUIRE(!r.best.empty());
  for (const ScoredLayout& b : r.best) CHECK(b.score.peak_memory_gib <= limit);
}
