// Regression: MemoryModel kept pointers to the model and job it was built from,
// so one built from temporaries (MakeJob(), MakeCluster(16)) read a dead
// stack frame (AddressSanitizer: stack-use-after-scope in ComputeLayout).
// Such lifetimes cannot go wrong now: MemoryModel owns copies, and what
// keeps a reference or a pointer to its argument refuses a temporary at
// compile time.
#include <doctest/doctest.h>

#include <type_traits>
#include <utility>

#include "costmodel/evaluate.h"
#include "costmodel/memory.h"
#include "costmodel/stage_work.h"
#include "fixtures.h"

using namespace foldplan;
using foldplan::testing::MakeCluster;
using foldplan::testing::MakeJob;
using foldplan::testing::MakeLayout;
using foldplan::testing::MakeMixtral;

namespace {

// Whether BuildStepWork accepts a pipeline of type P (an lvalue for P&, a
// temporary for P).
template <class P>
concept BuildsStepWorkFrom = requires(P&& pipeline) {
  BuildStepWork(std::declval<const Layout&>(), std::declval<const ModelSpec&>(), std::declval<const GpuSpec&>(),
                std::forward<P>(pipeline), std::declval<const ComputeTimes&>(), std::vector<CommOp>{}, 1LL);
};

}  // namespace

TEST_CASE("a memory model built from temporaries estimates as one built from named specs") {
  const MemoryModel from_temporaries(MakeMixtral(), MakeJob(), MakeCluster(16));
  const ModelSpec model = MakeMixtral();
  const JobSpec job = MakeJob();
  const ClusterSpec cluster = MakeCluster(16);
  const MemoryModel from_named(model, job, cluster);
  for (const Layout& l : {MakeLayout(128, 2, 1, 4, 8, 1), MakeLayout(128, 1, 2, 8, 8, 1)}) {
    const MemoryBreakdown a = from_temporaries.Estimate(l);
    const MemoryBreakdown b = from_named.Estimate(l);
    CHECK(a.peak_bytes == b.peak_bytes);
    CHECK(a.worst_stage == b.worst_stage);
  }
}

TEST_CASE("what keeps a reference to its argument refuses a temporary") {
  // The step work points to its pipeline description.
  static_assert(BuildsStepWorkFrom<const PipelineDescription&>);
  static_assert(!BuildsStepWorkFrom<PipelineDescription>);
  // The scorer keeps a reference to the cost model.
  static_assert(std::is_constructible_v<CostScorer, const CostModel&, Objective>);
  static_assert(!std::is_constructible_v<CostScorer, CostModel&&, Objective>);
  // The cost model's context and memory model point into its own members.
  static_assert(!std::is_copy_constructible_v<CostModel> && !std::is_copy_assignable_v<CostModel>);
  static_assert(!std::is_move_constructible_v<CostModel>);
  CHECK(true);
}
