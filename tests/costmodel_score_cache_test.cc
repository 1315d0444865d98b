// Score's memoisation (per-kind group placement, compute times, collective
// timings) changes no number: over seeded random shipped clusters, models,
// GPU counts and job options, and random legal layouts scored in a shuffled
// order (so the caches meet keys out of search order), Score equals
// ScoreReference bit for bit in every field, and its step time and peak
// memory equal Evaluate's. Each cache is also held to its uncached function.
// ScoreFamily, scoring a family of layouts at once (the search's way),
// reports each member as Score would under the bound of the moment.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "costmodel/collective_time_memo.h"
#include "costmodel/comm_plan.h"
#include "costmodel_comm_fixtures.h"
#include "costmodel/compute_profile.h"
#include "costmodel/compute_time.h"
#include "costmodel/compute_time_memo.h"
#include "costmodel/evaluate.h"
#include "costmodel/schedule.h"
#include "costmodel/schedule_bound.h"
#include "inputs/loader.h"
#include "planner/enumerate.h"
#include "planner/group_placement.h"
#include "seeded_draws.h"

namespace foldplan {
namespace {

using testing::Bits;
using testing::Draws;
using testing::RequireSameOp;

struct ScoreCase {
  ClusterSpec cluster;
  ModelSpec model;
  JobSpec job;
};

ScoreCase RandomCase(Draws& d) {
  const std::vector<std::string> clusters = {"h100-dgx-128n", "h100-dgx-16n", "h800-256n", "gb200-nvl72-4r",
                                             "b200-dgx-32n"};
  const std::vector<std::string> models = {"deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b", "olmoe-1b-7b",
                                           "llama3-70b", "qwen2-57b-a14b"};
  ScoreCase c{LoadCluster(clusters[d.Below(clusters.size())]).value(),
              LoadModel(models[d.Below(models.size())]).value(),
              LoadJob(d.Coin() ? "default" : "long-context-32k").value()};
  // A whole number of nodes, sometimes fewer, sometimes more than shipped.
  const std::vector<int> scale = {1, 2, 4};
  c.cluster.nodes = std::max(1, d.Coin() ? c.cluster.nodes / scale[d.Below(3)] : c.cluster.nodes * scale[d.Below(3)]);
  JobSpec& j = c.job;
  j.global_batch = std::vector<int>{256, 1024, 4096}[d.Below(3)];
  j.micro_batch_sizes = d.Subset(std::vector<int>{1, 2, 4});
  j.vpp = d.Subset(std::vector<int>{1, 2, 4});
  j.recompute = d.Subset(std::vector<Recompute>{
      Recompute::None(), Recompute::Selective(), Recompute::Full(),
      Recompute::Modules((1u << int(RecomputeModule::kLayernorm)) | (1u << int(RecomputeModule::kMoeAct))),
      Recompute::Modules(1u << int(RecomputeModule::kMoe))});
  j.cp_styles = d.Subset(std::vector<CpStyle>{CpStyle::kUlysses, CpStyle::kRing});
  j.orders = d.Subset(std::vector<std::string>{"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-ep-cp-dp-pp", "tp-dp-cp-ep-pp"});
  j.dispatchers = d.Subset(std::vector<Dispatcher>{Dispatcher::kAllToAll, Dispatcher::kAllGather,
                                                   Dispatcher::kDeepEP, Dispatcher::kHybridEP});
  j.a2a_overlap = d.Subset(std::vector<bool>{false, true});
  j.precisions = d.Subset(std::vector<Precision>{Precision::kBF16, Precision::kFP8Tensorwise,
                                                 Precision::kFP8Blockwise});
  j.fsdp = d.Subset(std::vector<bool>{false, true});
  j.tp_overlap = d.Subset(std::vector<bool>{false, true});
  j.routing_imbalance = d.Coin() ? 1.0 : 1.3;
  // Empty (each layout's implied schedule) or some of the others too.
  if (d.Coin()) {
    j.pipeline_schedules = d.Subset(std::vector<PipelineSchedule>{
        PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B, PipelineSchedule::kZeroBubbleH1,
        PipelineSchedule::kDualPipeV, PipelineSchedule::kGPipe});
  }
  // CUDA graphs change only the host's share (the per-thread host memo's
  // key); a padded capacity lets whole MoE blocks be captured.
  j.cuda_graphs = d.Subset(std::vector<CudaGraphs>{
      CudaGraphs::None(), ParseCudaGraphs("attn+moe_router+moe_preprocess").value(), CudaGraphs::Layer()});
  if (d.Coin()) j.capacity_factor = 1.25;
  // From a side stream of the state reached, which `d` does not advance:
  // every other draw, and so each test's cases and coverage counts, stay
  // what they were before the backend was drawn.
  Draws side{Mix64(d.state ^ 0x61747465ull)};
  j.attention_backend = AttentionBackend(side.Below(kAttentionBackendCount));
  return c;
}

void RequireSame(const LayoutScore& a, const LayoutScore& b, const Layout& l) {
  INFO("layout: " << FormatLayout(l));
  REQUIRE(a.fits == b.fits);
  REQUIRE(a.pruned == b.pruned);
  REQUIRE(Bits(a.step_time_s) == Bits(b.step_time_s));
  REQUIRE(Bits(a.peak_memory_gib) == Bits(b.peak_memory_gib));
  REQUIRE(Bits(a.objective) == Bits(b.objective));
}

// A case, its cost model and its legal layouts.
struct Trial {
  ScoreCase c;
  std::unique_ptr<CostModel> cost;
  std::vector<Layout> legal;
};

Trial TrialOf(ScoreCase c) {
  Trial t{std::move(c), nullptr, {}};
  auto created = CostModel::Create(t.c.cluster, t.c.model, t.c.job);
  REQUIRE(created.ok());
  t.cost = std::move(created).value();
  t.legal = EnumerateLayouts(t.cost->legality()).legal;
  return t;
}

// Calls f(cost, c, l) with `per_case` random legal layouts l of each of 24
// random cases c (none for a case without legal layouts).
template <class F>
void ForSampledLayouts(Draws& d, int per_case, F&& f) {
  for (int trial = 0; trial < 24; ++trial) {
    const Trial drawn = TrialOf(RandomCase(d));
    for (int i = 0; i < per_case && !drawn.legal.empty(); ++i) {
      const Layout& l = drawn.legal[d.Below(drawn.legal.size())];
      INFO("layout: " << FormatLayout(l));
      f(*drawn.cost, drawn.c, l);
    }
  }
}

TEST_CASE("Score equals ScoreReference bit for bit, and Evaluate's figures, over random jobs and clusters") {
  Draws d{20260613};
  size_t compared = 0, fitting = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const Trial drawn = TrialOf(RandomCase(d));
    const CostModel& cost = *drawn.cost;
    const std::vector<Layout>& legal = drawn.legal;
    if (legal.empty()) continue;
    // Up to 400 layouts, half in search order (the caches' common case),
    // half shuffled.
    std::vector<Layout> sample;
    const size_t step = std::max<size_t>(1, legal.size() / 200);
    for (size_t i = 0; i < legal.size() && sample.size() < 200; i += step) sample.push_back(legal[i]);
    for (int i = 0; i < 200; ++i) sample.push_back(legal[d.Below(legal.size())]);
    for (const Layout& l : sample) {
      const bool memory = d.Coin();
      const LayoutScore fast = cost.Score(l, memory);
      RequireSame(fast, cost.ScoreReference(l, memory), l);
      ++compared;
      if (compared % 8 == 0) {
        // Score documents its figures as Evaluate's.
        const Evaluation e = cost.Evaluate(l);
        INFO("layout: " << FormatLayout(l));
        REQUIRE(Bits(fast.peak_memory_gib) == Bits(e.memory.peak_gib()));
        if (fast.fits) REQUIRE(Bits(fast.step_time_s) == Bits(e.step.step_time_s));
      }
      fitting += fast.fits;
    }
  }
  CHECK(compared > 4000);
  CHECK(fitting > 500);  // step times compared too, not only memory
}

TEST_CASE("Score equals ScoreReference when a run's placements and their plans' parts recur") {
  // CostModel::PlacementOf keeps the placements of the run in hand (one
  // world, pp, tp, cp), the current one's collective timings carried by
  // ChangePlacement when it returns to a kept one, and under each kept
  // placement the parts of the plans made on it (CommPlanOf): the
  // per-layer ops, which layouts of another pipeline (vpp, stages,
  // schedule) and recompute set with the same LayerCommKey take, and the
  // step ops of the last pipeline, which layouts of its ranks take
  // (another micro-batch size, CP style, recipe). Layouts of six distinct
  // placements, each with those of its placement that differ in pipeline
  // or micro-batch size, visited in a random order: they return to kept
  // placements, take plan parts built for other layouts, change runs (all
  // dropped), and each score must still be ScoreReference's, and each
  // work's plan (CostModel::Work) BuildCommPlan's, op by op.
  Draws d{20261204};
  size_t compared = 0, returns = 0, other_pipelines = 0, other_mbs = 0, ops = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const Trial drawn = TrialOf(RandomCase(d));
    const CostModel& cost = *drawn.cost;
    std::vector<Layout> distinct;  // fitting, of distinct placements, in search order
    std::vector<LayoutPlacement> placements;
    for (const Layout& l : drawn.legal) {
      if (distinct.size() == 6) break;
      Result<LayoutPlacement> placed = PlaceGroups(l, *cost.context().topology);
      if (!placed.ok() || !cost.ScoreReference(l, false).fits ||
          std::find(placements.begin(), placements.end(), placed.value()) != placements.end())
        continue;
      placements.push_back(placed.value());
      distinct.push_back(l);
    }
    if (distinct.size() < 6) continue;
    std::vector<Layout> visited = distinct;
    for (const Layout& l : drawn.legal) {
      for (const Layout& chosen : distinct) {
        const bool placed_alike = l.world == chosen.world && l.pp == chosen.pp && l.tp == chosen.tp &&
                                  l.cp == chosen.cp && l.dp == chosen.dp && l.ep == chosen.ep &&
                                  l.etp == chosen.etp && l.order == chosen.order && l.placement == chosen.placement;
        const bool other_pipeline = l.vpp != chosen.vpp || l.stage_layers != chosen.stage_layers ||
                                    l.schedule_or_default() != chosen.schedule_or_default();
        if (placed_alike && ((other_pipeline && LayerCommKeyOf(l) == LayerCommKeyOf(chosen)) ||
                             (!other_pipeline && l.mbs != chosen.mbs))) {
          visited.push_back(l);
          ++(other_pipeline ? other_pipelines : other_mbs);
        }
      }
    }
    size_t previous = 0;
    for (int i = 0; i < 200; ++i) {
      const size_t at = d.Below(visited.size());
      returns += at != previous;
      previous = at;
      const Layout& l = visited[at];
      RequireSame(cost.Score(l, false), cost.ScoreReference(l, false), l);
      ++compared;
      INFO("layout: " << FormatLayout(l));
      const PipelineDescription pipeline = DescribePipeline(l, drawn.c.model, &cost.pipeline_weights());
      const std::vector<CommOp> want =
          BuildCommPlan(l, cost.context(), PlaceGroups(l, *cost.context().topology).value(), pipeline);
      const StepWork work = cost.Work(l, pipeline);
      REQUIRE(work.ops.size() == want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        RequireSameOp(want[k], work.ops[k]);
        ++ops;
      }
    }
  }
  CHECK(compared > 1000);
  CHECK(returns > 800);
  CHECK(other_pipelines > 20);
  CHECK(other_mbs > 20);
  CHECK(ops > 10000);
}

// Pruning (CostModel::Score with a bound): StepTimeLowerBound is below the
// reference step time as doubles, and a bounded Score is pruned exactly
// when its bound (that, or the peak for the memory objective) exceeds the
// threshold, strictly; otherwise it is ScoreReference bit for bit. Pruned,
// fits and the peak are still exact.
TEST_CASE("the step-time bound is below ScoreReference's, and a bounded Score prunes exactly by it") {
  Draws d{20261201};
  size_t fitting = 0, pruned = 0, kept = 0;
  double tightness = 0;  // the sum of bound / step
  ForSampledLayouts(d, 200, [&](const CostModel& cost, const ScoreCase&, const Layout& l) {
    for (const bool memory : {false, true}) {
      const LayoutScore want = cost.ScoreReference(l, memory);
      REQUIRE(!want.pruned);
      if (!want.fits) {
        // Never pruned: the memory check decides first.
        RequireSame(cost.Score(l, memory, 0.0), want, l);
        continue;
      }
      const double bound = memory ? want.peak_memory_gib : cost.StepTimeLowerBound(l);
      if (!memory) {
        REQUIRE(bound > 0);
        REQUIRE(bound <= want.step_time_s);
        tightness += bound / want.step_time_s;
        ++fitting;
      }
      const double inf = std::numeric_limits<double>::infinity();
      const double thresholds[] = {bound,
                                   std::nextafter(bound, -inf),
                                   std::nextafter(bound, inf),
                                   want.objective,
                                   want.objective * 0.5,
                                   bound * (0.5 + 0.5 * double(d.Below(1000)) / 1000.0),
                                   0.0,
                                   inf};
      for (const double t : thresholds) {
        CAPTURE(t);
        const LayoutScore got = cost.Score(l, memory, t);
        REQUIRE(got.pruned == (bound > t));
        if (got.pruned) {
          REQUIRE(got.fits);
          REQUIRE(Bits(got.peak_memory_gib) == Bits(want.peak_memory_gib));
          REQUIRE(want.objective > t);  // what pruning promises
          ++pruned;
        } else {
          RequireSame(got, want, l);
          ++kept;
        }
      }
    }
  });
  CHECK(fitting > 500);
  CHECK(pruned > 1000);
  CHECK(kept > 1000);
  MESSAGE("step-time bound / step time, mean over " << fitting << " fitting layouts: " << tightness / double(fitting));
}

// What lets ScoreFamily prune every recompute mode of a compute key by the
// bound without recomputation (schedule_bound.h LowerBoundGrowsWithRecompute):
// under each schedule but ZB-H1 no recompute set gives a layout a lower
// StepTimeLowerBound, as doubles, than none does.
TEST_CASE("the step-time bound without recomputation is below every recompute mode's, but under ZB-H1") {
  Draws d{20261203};
  const std::vector<Recompute> modes = {
      Recompute::Selective(), Recompute::Full(),
      Recompute::Modules((1u << int(RecomputeModule::kLayernorm)) | (1u << int(RecomputeModule::kMoeAct))),
      Recompute::Modules(1u << int(RecomputeModule::kMoe)),
      Recompute::Modules((1u << kRecomputeModuleCount) - 1)};
  std::map<PipelineSchedule, size_t> compared;
  for (int trial = 0; trial < 24; ++trial) {
    ScoreCase c = RandomCase(d);
    c.job.pipeline_schedules = {PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B,
                                PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipeV,
                                PipelineSchedule::kGPipe};
    const Trial drawn = TrialOf(c);
    const CostModel& cost = *drawn.cost;
    const std::vector<Layout>& legal = drawn.legal;
    for (int i = 0; i < 100 && !legal.empty(); ++i) {
      Layout l = legal[d.Below(legal.size())];
      const PipelineSchedule schedule = l.schedule_or_default();
      if (!LowerBoundGrowsWithRecompute(schedule)) continue;
      l.recompute = Recompute::None();
      const double floor = cost.StepTimeLowerBound(l);
      for (const Recompute rc : modes) {
        l.recompute = rc;
        INFO("layout: " << FormatLayout(l));
        REQUIRE(cost.StepTimeLowerBound(l) >= floor);
        ++compared[schedule];
      }
    }
  }
  CHECK(compared[PipelineSchedule::k1F1B] > 500);
  CHECK(compared[PipelineSchedule::kInterleaved1F1B] > 500);
  CHECK(compared[PipelineSchedule::kDualPipeV] > 100);
  CHECK(compared[PipelineSchedule::kGPipe] > 100);
  CHECK(!LowerBoundGrowsWithRecompute(PipelineSchedule::kZeroBubbleH1));
}

// What lets ScoreFamily prune a whole family at once: the family bound over
// a set of dispatchers and precisions (CostModel::FamilyStepTimeLowerBound,
// from the least block costs of their computes) is, as doubles, at or below
// StepTimeLowerBound of the layout under each dispatcher and precision of
// the sets and any recompute set, under every schedule. Over one
// dispatcher and precision without recomputation, at dp 1 (where its FP8
// weight casts are timed), it is that bound itself under 1F1B, GPipe and
// the interleaved schedule, so that it is as tight as the layouts' own
// there. Its per-thread memo gives the same bits.
TEST_CASE("the family's step-time bound is below each member's, and its own under one dispatcher and precision") {
  Draws d{20261206};
  const std::vector<Recompute> modes = {
      Recompute::None(), Recompute::Selective(), Recompute::Full(),
      Recompute::Modules((1u << int(RecomputeModule::kLayernorm)) | (1u << int(RecomputeModule::kMoeAct)))};
  std::map<PipelineSchedule, size_t> compared;
  size_t equal = 0;
  for (int trial = 0; trial < 24; ++trial) {
    ScoreCase c = RandomCase(d);
    c.job.pipeline_schedules = {PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B,
                                PipelineSchedule::kZeroBubbleH1, PipelineSchedule::kDualPipeV,
                                PipelineSchedule::kGPipe};
    const Trial drawn = TrialOf(c);
    const CostModel& cost = *drawn.cost;
    for (int i = 0; i < 60 && !drawn.legal.empty(); ++i) {
      Layout l = drawn.legal[d.Below(drawn.legal.size())];
      INFO("layout: " << FormatLayout(l));
      const PipelineSchedule schedule = l.schedule_or_default();
      // Its own dispatcher and precision, and maybe others.
      const uint32_t dispatchers =
          (1u << static_cast<unsigned>(l.dispatcher)) | static_cast<uint32_t>(d.Below(1u << kDispatcherCount));
      const uint32_t precisions =
          (1u << static_cast<unsigned>(l.precision)) | static_cast<uint32_t>(d.Below(1u << kPrecisionCount));
      const double family = cost.FamilyStepTimeLowerBound(l, dispatchers, precisions);
      REQUIRE(Bits(cost.FamilyStepTimeLowerBound(l, dispatchers, precisions, true)) == Bits(family));
      for (int m = 0; m < 4; ++m) {
        Layout member = l;
        do {
          member.dispatcher = static_cast<Dispatcher>(d.Below(kDispatcherCount));
        } while ((dispatchers >> static_cast<unsigned>(member.dispatcher) & 1u) == 0);
        do {
          member.precision = static_cast<Precision>(d.Below(kPrecisionCount));
        } while ((precisions >> static_cast<unsigned>(member.precision) & 1u) == 0);
        member.recompute = modes[d.Below(modes.size())];
        INFO("member: " << FormatLayout(member));
        REQUIRE(family <= cost.StepTimeLowerBound(member));
        ++compared[schedule];
      }
      // One dispatcher and precision: the layout's own bound.
      l.recompute = Recompute::None();
      l.dp = 1;
      const double own = cost.StepTimeLowerBound(l);
      const double alone = cost.FamilyStepTimeLowerBound(l, 1u << static_cast<unsigned>(l.dispatcher),
                                                         1u << static_cast<unsigned>(l.precision));
      REQUIRE(alone <= own);
      if (schedule == PipelineSchedule::k1F1B || schedule == PipelineSchedule::kGPipe ||
          schedule == PipelineSchedule::kInterleaved1F1B) {
        REQUIRE(Bits(alone) == Bits(own));
        ++equal;
      }
    }
  }
  CHECK(compared[PipelineSchedule::k1F1B] > 500);
  CHECK(compared[PipelineSchedule::kInterleaved1F1B] > 500);
  CHECK(compared[PipelineSchedule::kZeroBubbleH1] > 100);
  CHECK(compared[PipelineSchedule::kDualPipeV] > 100);
  CHECK(compared[PipelineSchedule::kGPipe] > 100);
  CHECK(equal > 200);
}

// ScoreFamily (the search's way) against Score, member by member. A sink
// records what it is told; its bound is fixed (the totals then follow from
// Score under it: the members not fitting, pruned and ranked) or falls after
// every member reported (each member is then its ScoreReference, or pruned
// with its objective above the bound of the moment it was reported).
class RecordingSink : public ScoreSink {
 public:
  RecordingSink(double bound, bool falling) : bound_(bound), falling_(falling) {}
  double PruneAbove() const override { return bound_; }
  void Scored(const Layout& layout, const LayoutScore& score) override {
    one.push_back({layout, score, bound_});
    if (falling_ && score.fits && !score.pruned) bound_ = std::min(bound_, score.objective);
  }
  void ScoredAlike(const LayoutScore& score, uint64_t count) override {
    REQUIRE((!score.fits || score.pruned));  // alike members cannot rank
    REQUIRE(count > 0);
    alike.push_back({score, count});
  }
  struct One {
    Layout layout;
    LayoutScore score;
    double bound;  // PruneAbove when it was reported
  };
  std::vector<One> one;
  std::vector<std::pair<LayoutScore, uint64_t>> alike;

 private:
  double bound_;
  bool falling_;
};

TEST_CASE("ScoreFamily reports every member once, with its Score or pruned under the bound of the moment") {
  Draws d{20261202};
  size_t families = 0, members_seen = 0, alike_pruned = 0, alike_unfit = 0, ranked = 0, comm_pruned = 0;
  for (int trial = 0; trial < 16; ++trial) {
    const ScoreCase c = RandomCase(d);
    auto created = CostModel::Create(c.cluster, c.model, c.job);
    REQUIRE(created.ok());
    const CostModel& cost = *created.value();
    const LegalityContext legality = cost.legality();  // the enumerator keeps a reference
    LayoutEnumerator walker(legality, nullptr);
    Enumeration counts;
    size_t seen = 0;
    for (const EnumerationItem& item : walker.Items()) {
      walker.RunFamilies(item, &counts, [&](const LayoutFamily& family) {
        if (seen++ % 7 != 0 || families >= size_t(40) * size_t(trial + 1)) return;
        ++families;
        std::vector<Layout> members;
        family.ForEachMember([&](const Layout& l) { members.push_back(l); });
        const bool memory = d.Coin();
        // A fixed bound near the middle of the fitting members' objectives.
        std::vector<double> objectives;
        for (const Layout& l : members) {
          const LayoutScore s = cost.ScoreReference(l, memory);
          if (s.fits) objectives.push_back(s.objective);
        }
        std::sort(objectives.begin(), objectives.end());
        const double inf = std::numeric_limits<double>::infinity();
        const double middle = objectives.empty() ? inf : objectives[objectives.size() / 2];
        for (const bool falling : {false, true}) {
          CAPTURE(falling);
          RecordingSink sink(falling ? inf : middle, falling);
          cost.ScoreFamily(family, memory, sink);
          uint64_t reported = sink.one.size();
          for (const auto& a : sink.alike) reported += a.second;
          REQUIRE(reported == members.size());
          std::vector<std::string> texts;
          for (const RecordingSink::One& o : sink.one) {
            // Its Score, or pruned as the bound of the moment allows.
            const LayoutScore want = cost.ScoreReference(o.layout, memory);
            if (o.score.pruned) {
              INFO("layout: " << FormatLayout(o.layout));
              REQUIRE(o.score.fits);
              REQUIRE(Bits(o.score.peak_memory_gib) == Bits(want.peak_memory_gib));
              REQUIRE(want.objective > o.bound);
            } else {
              RequireSame(o.score, want, o.layout);
            }
            texts.push_back(FormatLayout(o.layout));
            ranked += o.score.fits && !o.score.pruned;
          }
          // Each reported member is a distinct member of the family.
          std::sort(texts.begin(), texts.end());
          REQUIRE(std::adjacent_find(texts.begin(), texts.end()) == texts.end());
          for (const std::string& t : texts) {
            REQUIRE(std::any_of(members.begin(), members.end(), [&](const Layout& l) { return FormatLayout(l) == t; }));
          }
          if (falling) continue;
          // Under a fixed bound a member is pruned when Score prunes it or,
          // with the throughput objective, when its bound with
          // communication is above the bound; it fits as Score says.
          uint64_t unfit = 0, pruned = 0, want_unfit = 0, want_pruned = 0;
          for (const Layout& l : members) {
            const LayoutScore s = cost.Score(l, memory, middle);
            want_unfit += !s.fits;
            const bool by_comm = s.fits && !s.pruned && !memory && cost.StepTimeLowerBoundWithComm(l) > middle;
            want_pruned += s.pruned || by_comm;
            comm_pruned += by_comm;
          }
          for (const RecordingSink::One& o : sink.one) {
            unfit += !o.score.fits;
            pruned += o.score.pruned;
          }
          for (const auto& a : sink.alike) {
            (a.first.fits ? pruned : unfit) += a.second;
            (a.first.fits ? alike_pruned : alike_unfit) += a.second;
          }
          CHECK(unfit == want_unfit);
          CHECK(pruned == want_pruned);
        }
        members_seen += members.size();
      });
    }
  }
  CHECK(families > 100);
  CHECK(members_seen > 2000);
  CHECK(alike_pruned > 100);  // members pruned together, and checked
  CHECK(alike_unfit > 100);
  CHECK(ranked > 500);
  CHECK(comm_pruned > 10);  // pruned by the bound with communication only
}

// What ScoreFamily's bound with communication rests on (comm_plan.h
// CommFloorVariant): on its placement, every member's plan takes at least
// the plan of its variant with no recomputation and no EP or TP overlap,
// per block kind and per stage crossing, as doubles. And that bound is
// below the member's step time, at least the compute-only bound (but for
// its 1e-9 margin), and often well above it.
TEST_CASE("a layout's plan takes at least its CommFloorVariant's per block, and the bound with it is below the step") {
  Draws d{20261205};
  size_t layouts = 0, above = 0;
  double tightness = 0;
  ForSampledLayouts(d, 100, [&](const CostModel& cost, const ScoreCase& c, const Layout& l) {
    Layout least = l;
    LayoutFamily::SetVariant(CommFloorVariant(LayoutFamily::VariantOf(l)), &least);
    const PipelineDescription pipeline = DescribePipeline(l, c.model, &cost.pipeline_weights());
    const CommSeconds own = CommSecondsOf(cost.Work(l, pipeline));
    const CommSeconds floor = CommSecondsOf(cost.Work(least, pipeline));
    for (size_t k = 0; k < own.block_s.size(); ++k) REQUIRE(own.block_s[k] >= floor.block_s[k]);
    REQUIRE(own.crossing_s >= floor.crossing_s);
    const LayoutScore want = cost.ScoreReference(l, false);
    if (!want.fits) return;  // no step time to compare
    const double bound = cost.StepTimeLowerBoundWithComm(l);
    REQUIRE(bound <= want.step_time_s);
    REQUIRE(bound >= cost.StepTimeLowerBound(l) * (1 - 2e-9));
    ++layouts;
    above += bound > cost.StepTimeLowerBound(l) * 1.01;
    tightness += bound / want.step_time_s;
  });
  CHECK(layouts > 1000);
  CHECK(above > layouts / 10);
  MESSAGE(above << " of " << layouts << " fitting layouts: the bound with communication over 1% above the compute-only"
                   " one; bound / step time, mean: " << tightness / double(layouts));
}

TEST_CASE("two cost models on one thread keep their caches apart") {
  const ClusterSpec cluster = LoadCluster("h100-dgx-16n").value();
  const JobSpec job = LoadJob("default").value();
  auto a = std::move(CostModel::Create(cluster, LoadModel("mixtral-8x7b").value(), job)).value();
  auto b = std::move(CostModel::Create(cluster, LoadModel("qwen3-30b-a3b").value(), job)).value();
  const std::vector<Layout> legal = EnumerateLayouts(a->legality()).legal;
  REQUIRE(legal.size() > 10);
  for (size_t i = 0; i < legal.size(); i += legal.size() / 10) {
    // Alternate models on the same layout: a cache keyed without the model
    // would return the other's numbers.
    for (const CostModel* m : {a.get(), b.get(), a.get()}) RequireSame(m->Score(legal[i], false), m->ScoreReference(legal[i], false), legal[i]);
  }
}

// The cache's entries, and its second level (what keys differing only in
// ep, etp and the dispatcher share), against the uncached times: each drawn
// layout is asked for as drawn and with one field its keys hold changed
// (ep and etp, the dispatcher, the CP style, the micro-batch size, the
// precision), so that keys meet their neighbours in both levels, or with
// another dp (the micro-batches per step, which share out the FP8 weight
// casts, are in neither key: an entry's are timed again).
TEST_CASE("ComputeTimesCache returns ComputeLayerTimes bit for bit") {
  Draws d{7};
  for (const char* model : {"deepseek-v3", "qwen3-30b-a3b"}) {
    CAPTURE(model);
    ScoreCase c = RandomCase(d);
    c.job.precisions = {Precision::kBF16, Precision::kFP8Tensorwise};
    c.job.cp_styles = {CpStyle::kUlysses, CpStyle::kRing};
    auto cost = std::move(CostModel::Create(c.cluster, LoadModel(model).value(), c.job)).value();
    const std::vector<Layout> legal = EnumerateLayouts(cost->legality()).legal;
    REQUIRE(!legal.empty());
    ComputeTimesCache cache(64);  // small: the clearing path runs too
    for (int i = 0; i < 2000; ++i) {
      // Any recompute set (the cache derives each from one base's pieces).
      Layout l = legal[d.Below(legal.size())];
      const uint64_t r = d.Below(1u << kRecomputeModuleCount) + 1;
      l.recompute =
          r == (1u << kRecomputeModuleCount) ? Recompute::Full() : Recompute::Modules(static_cast<uint32_t>(r));
      const Layout& other = legal[d.Below(legal.size())];
      Layout neighbour = l;
      switch (d.Below(6)) {
        case 0: neighbour.ep = other.ep, neighbour.etp = other.etp; break;
        case 1: neighbour.dispatcher = static_cast<Dispatcher>(d.Below(kDispatcherCount)); break;
        case 2: neighbour.cp_style = l.cp_style == CpStyle::kRing ? CpStyle::kUlysses : CpStyle::kRing; break;
        case 3: neighbour.mbs = other.mbs; break;
        case 4: neighbour.precision = other.precision; break;
        case 5: neighbour.dp = other.dp; break;
      }
      for (const Layout& asked : {l, neighbour}) {
        INFO("layout: " << FormatLayout(asked));
        const ComputeTimes want = ComputeLayerTimes(asked, cost->context());
        const ComputeTimes& got = cache.Get(asked, cost->context());
        static_assert(sizeof(ComputeTimes) % sizeof(double) == 0, "doubles only: compared bytewise");
        REQUIRE(std::memcmp(&want, &got, sizeof want) == 0);
        REQUIRE(cache.size() <= 64);
      }
    }
  }
}

TEST_CASE("ComputeRateMemo returns the profile's rates bit for bit") {
  Draws d{13};
  for (int trial = 0; trial < 4; ++trial) {
    const ScoreCase c = RandomCase(d);  // the cluster's GPU: FP8 or not, scaled
    auto cost = std::move(CostModel::Create(c.cluster, c.model, c.job)).value();
    const ComputeProfile& profile = *cost->context().profile;
    // Few values per argument, so lookups repeat; fractions and 0 as the
    // per-rank shares give them.
    std::vector<double> dims = {0, 0.5, 1, 3};
    for (int i = 0; i < 20; ++i) dims.push_back(std::exp(double(d.Below(1400)) / 100.0));
    auto dim = [&] { return dims[d.Below(dims.size())]; };
    const Precision precisions[] = {Precision::kBF16, Precision::kFP8Delayed, Precision::kFP8Tensorwise,
                                    Precision::kFP8Blockwise, Precision::kMXFP8};
    ComputeRateMemo roomy(1 << 16);
    ComputeRateMemo small(16);  // evicts: cleared again and again
    const int calls = 6000;
    for (int i = 0; i < calls; ++i) {
      const Precision p = precisions[d.Below(5)];
      const double m = dim(), n = dim(), k = dim();
      const int experts = int(d.Below(300)) - 1;
      const int heads = int(d.Below(130)), kv = int(d.Below(130)), head_dim = int(d.Below(260));
      const int v_dim = d.Coin() ? head_dim : int(d.Below(260));
      const bool fwd_bwd = d.Coin();
      const AttentionBackend backend = AttentionBackend(d.Below(kAttentionBackendCount));
      const AttentionKernel kernel{m, heads, kv, head_dim, v_dim, d.Coin()};
      INFO("m ", m, " n ", n, " k ", k, " experts ", experts, " heads ", heads, " kv ", kv, " d ", head_dim,
           " d_v ", v_dim, " causal ", kernel.causal, " backend ", Name(backend));
      for (ComputeRateMemo* memo : {&roomy, &small}) {
        REQUIRE(Bits(memo->GemmFlopsPerS(profile, m, n, k, p)) == Bits(profile.GemmFlopsPerS(m, n, k, p)));
        REQUIRE(Bits(memo->GroupedGemmFlopsPerS(profile, experts, m, k, n, p)) ==
                Bits(profile.GroupedGemmFlopsPerS(experts, m, k, n, p)));
        REQUIRE(Bits(memo->AttentionFlopsPerS(profile, backend, kernel, fwd_bwd)) ==
                Bits(profile.AttentionFlopsPerS(backend, kernel, fwd_bwd)));
      }
      REQUIRE(small.size() <= 16);
    }
    // Repeated lookups were found, not stored again (the pools repeat).
    CHECK(roomy.size() < size_t(3 * calls));
    CHECK(roomy.size() > 16);
    roomy.Clear();
    CHECK(roomy.size() == 0);
  }
}

TEST_CASE("ComputeTimesCache gives each recompute set its sums when sets alternate on one key") {
  Draws d{7};  // a case with legal DeepSeek-V3 layouts
  ScoreCase c = RandomCase(d);
  c.job.precisions = {Precision::kBF16, Precision::kFP8Tensorwise};
  auto cost = std::move(CostModel::Create(c.cluster, LoadModel("deepseek-v3").value(), c.job)).value();
  const std::vector<Layout> legal = EnumerateLayouts(cost->legality()).legal;
  REQUIRE(!legal.empty());
  const Recompute sets[] = {Recompute::None(), Recompute::Full(), Recompute::Selective(),
                            Recompute::Modules(1u << int(RecomputeModule::kMoeAct))};
  for (size_t i = 0; i < legal.size(); i += std::max<size_t>(1, legal.size() / 50)) {
    ComputeTimesCache cache(4);
    // The same key under set after set, each asked twice and again later
    // (a hit with the set last applied, and with another).
    for (int round = 0; round < 3; ++round) {
      for (const Recompute& rc : sets) {
        for (int again = 0; again < 2; ++again) {
          Layout l = legal[i];
          l.recompute = rc;
          const ComputeTimes want = ComputeLayerTimes(l, cost->context());
          const ComputeTimes& got = cache.Get(l, cost->context());
          REQUIRE(std::memcmp(&want, &got, sizeof want) == 0);
        }
      }
    }
    CHECK(cache.size() == 1);
  }
}


// The memo's timings and flex copies, and the context's RankParamCounter
// (CostModel's; the reference counts the model's parameters itself),
// change no op.
TEST_CASE("CollectiveTimeMemo gives the plan's timings unchanged") {
  Draws d{11};
  ScoreCase c = RandomCase(d);
  c.job.dispatchers = {Dispatcher::kAllToAll, Dispatcher::kDeepEP, Dispatcher::kAllGather};
  auto cost = std::move(CostModel::Create(c.cluster, LoadModel("deepseek-v3").value(), c.job)).value();
  const std::vector<Layout> legal = EnumerateLayouts(cost->legality()).legal;
  REQUIRE(!legal.empty());
  CollectiveTimeMemo memo;
  size_t ops = 0;
  for (size_t start = 0; start < legal.size(); start += std::max<size_t>(1, legal.size() / 40)) {
    const Result<LayoutPlacement> placement = PlaceGroups(legal[start], *cost->context().topology);
    if (!placement.ok()) continue;
    memo.Clear();  // one placement per memo
    // The layouts after `start` that share its placement, twice (the second
    // pass finds every timing in the memo).
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t i = start; i < legal.size() && i < start + 16; ++i) {
        const Layout& l = legal[i];
        if (l.pp != legal[start].pp || l.tp != legal[start].tp || l.cp != legal[start].cp ||
            l.dp != legal[start].dp || l.ep != legal[start].ep || l.etp != legal[start].etp ||
            l.order != legal[start].order || l.placement != legal[start].placement)
          break;
        const PipelineDescription pipeline = DescribePipeline(l, c.model, &cost->pipeline_weights());
        CostContext counting = cost->context();
        counting.rank_params = nullptr;
        const std::vector<CommOp> want = BuildCommPlan(l, counting, *placement, pipeline);
        const std::vector<CommOp> got = BuildCommPlan(l, cost->context(), *placement, pipeline, &memo);
        REQUIRE(want.size() == got.size());
        for (size_t k = 0; k < want.size(); ++k) {
          RequireSameOp(want[k], got[k]);
          ++ops;
        }
      }
    }
  }
  CHECK(ops > 100);
  CHECK(memo.size() > 0);
}

// CostModel carries its memo from one placement to the next, keeping the
// timings of the group kinds placed alike (ChangePlacement), and those of
// any span met before in its second level (the plans fail with the span or
// its link sharing left out of that level's key). Layouts in search order
// (neighbouring placements share kinds) and at random, some not placeable.
TEST_CASE("CollectiveTimeMemo carried across placements gives the plan's ops unchanged") {
  Draws d{13};
  size_t ops = 0, placements = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const Trial drawn = TrialOf(RandomCase(d));
    const ScoreCase& c = drawn.c;
    const std::vector<Layout>& legal = drawn.legal;
    CollectiveTimeMemo memo;
    Result<LayoutPlacement> last = Status::Error("none yet");
    size_t at = 0;
    for (int i = 0; i < 300 && !legal.empty(); ++i) {
      at = d.Below(4) == 0 ? d.Below(legal.size()) : (at + 1) % legal.size();
      Layout l = legal[at];
      if (d.Below(16) == 0) l.world *= 2;  // the placement refuses it
      INFO("layout: " << FormatLayout(l));
      Result<LayoutPlacement> placement = PlaceGroups(l, *drawn.cost->context().topology);
      if (!last.ok() || !placement.ok() || !(last.value() == placement.value())) {
        memo.ChangePlacement(last.ok() ? &last.value() : nullptr, placement.ok() ? &placement.value() : nullptr);
        ++placements;
      }
      last = std::move(placement);
      if (!last.ok()) continue;
      const PipelineDescription pipeline = DescribePipeline(l, c.model, &drawn.cost->pipeline_weights());
      const std::vector<CommOp> want = BuildCommPlan(l, drawn.cost->context(), last.value(), pipeline);
      const std::vector<CommOp> got = BuildCommPlan(l, drawn.cost->context(), last.value(), pipeline, &memo);
      REQUIRE(want.size() == got.size());
      for (size_t k = 0; k < want.size(); ++k) {
        RequireSameOp(want[k], got[k]);
        ++ops;
      }
    }
  }
  CHECK(ops > 1000);
  CHECK(placements > 100);
}

TEST_CASE("CollectiveTimeMemo's flex copies are ExpectedFlexCopies' bit for bit") {
  // Arguments drawn from few values, so keys repeat, follow one another
  // and differ from the last in one field only.
  Draws d{12};
  CollectiveTimeMemo memo;
  const std::vector<int> experts = {8, 64, 256}, top_k = {1, 2, 8}, ep = {1, 4, 8, 64}, etp = {1, 2},
                         domains = {1, 2, 8}, per_domain = {0, 1, 4, 8};
  auto draw = [&d](const std::vector<int>& values) { return values[d.Below(values.size())]; };
  int e = 256, k = 8, p = 8, t = 1;
  GroupSpan span;
  for (int i = 0; i < 4000; ++i) {
    switch (d.Below(8)) {  // one field changes, or none
      case 0: e = draw(experts); break;
      case 1: k = draw(top_k); break;
      case 2: p = draw(ep); break;
      case 3: t = draw(etp); break;
      case 4: span.domains = draw(domains); break;
      case 5: span.min_per_domain = draw(per_domain); break;
      case 6: span.max_per_domain = draw(per_domain); break;
      default: break;
    }
    const FlexTokenCopies want = ExpectedFlexCopies(e, k, p, t, span);
    const FlexTokenCopies got = memo.FlexCopies(e, k, p, t, span);
    REQUIRE(Bits(want.gpus) == Bits(got.gpus));
    REQUIRE(Bits(want.domains) == Bits(got.domains));
    REQUIRE(Bits(want.network) == Bits(got.network));
    REQUIRE(Bits(want.nvlink) == Bits(got.nvlink));
    if (i % 500 == 0) memo.Clear();
  }
}

}  // namespace
}  // namespace foldplan
