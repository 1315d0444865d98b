// The search's scoring path (planner/scoring.h through CostScorer): Score,
// a layout at a time, and ScoreFamily, a family at a time, through the
// per-thread memos (evaluate_memo.h) and pruned by the step-time bounds
// (schedule.h). Every score either equals ScoreReference bit for bit or is
// pruned under a bound it provably exceeds (tests/costmodel_score_cache_test.cc).
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "costmodel/collective_time_memo.h"
#include "costmodel/comm_plan.h"
#include "costmodel/evaluate.h"
#include "costmodel/evaluate_memo.h"
#include "costmodel/memory_memo.h"
#include "costmodel/schedule.h"
#include "costmodel/schedule_bound.h"
#include "costmodel/stage_work.h"
#include "planner/group_placement.h"
#include "planner/layout_family.h"
#include "planner/pipeline.h"

namespace foldplan {

LayoutScore CostModel::Score(const Layout& layout, bool minimise_memory, double prune_above) const {
  const PipelineDescription& pipeline = CachedPipeline(layout);
  return FinishScore(layout, pipeline, PeakScore(memory_.PeakBytes(layout, pipeline)), minimise_memory, prune_above);
}

// Pruning (Score's header): the memory objective is the peak, exact here
// (the step time would only break ties among equal peaks); the step time
// is at least PipelineLowerBound of the compute alone (schedule_bound.cc states
// the proof; the exposed data-parallel part and the optimizer step only
// add), so the placement and the communication plan are skipped when that
// already exceeds the bound.
LayoutScore CostModel::FinishScore(const Layout& layout, const PipelineDescription& pipeline, LayoutScore score,
                                   bool minimise_memory, double prune_above,
                                   ComputedWork* computed, const std::vector<CommOp>* plan_without_recompute) const {
  if (!score.fits) return score;
  if (minimise_memory && score.peak_memory_gib > prune_above) {
    score.pruned = true;
    return score;
  }
  // The given work takes this layout's plan in place (AddCommOf replaces
  // its ops and reads nothing else of it) unless the plan without
  // recomputation is given (then its ops are not read); otherwise one per
  // thread, its storage kept from score to score.
  thread_local StepWork own;
  StepWork& work = computed ? computed->work : own;
  if (!computed) ComputeWorkOf(layout, pipeline, true, &own);
  if (!minimise_memory && prune_above < kNoPruning &&
      (computed ? computed->bound_s : PipelineLowerBound(work)) > prune_above) {
    score.pruned = true;
    return score;
  }
  // The compute work holds no host (the bounds read none), and a family's
  // members share a compute key's work but not their host's (CUDA graphs,
  // overlaps): the member's own.
  work.host = HostOf(layout, true);
  if (plan_without_recompute) {
    // The schedule reads the plan through its sums, which count the
    // layout's recompute calls in (SumPlan): no copy of the plan.
    thread_local PipelineTimes times;  // its storage kept from score to score
    SchedulePipeline(work, SumPlan(*plan_without_recompute, work.mtp_moe, layout.recompute), &times);
    score.step_time_s = StepAfter(layout, pipeline, work, times).step_time_s;
  } else {
    AddCommOf(layout, pipeline, true, &work);
    score.step_time_s = StepOf(layout, pipeline, work, nullptr).step_time_s;
  }
  score.objective = minimise_memory ? score.peak_memory_gib : score.step_time_s;
  return score;
}

double CostModel::FamilyStepTimeLowerBound(const Layout& layout, uint32_t dispatchers, uint32_t precisions,
                                           bool cached) const {
  const PipelineDescription pipeline = DescribePipeline(layout, model_, &weights_);
  StepWork least;
  BuildLeastStepWork(layout, model_, cluster_.gpu, pipeline, LeastBlocksOf(layout, dispatchers, precisions, cached),
                     MicroBatchesPerStep(job_, layout), &least);
  return LeastPipelineLowerBound(least);
}

namespace {

// Whether two variants differ only where memory does not look (the TP
// overlap; a family's members share all memory reads but these fields).
bool SameMemory(const RecipeVariant& a, const RecipeVariant& b) {
  return a.recompute == b.recompute && a.dispatcher == b.dispatcher && a.a2a_overlap == b.a2a_overlap &&
         a.precision == b.precision && a.fsdp == b.fsdp;
}

}  // namespace

// A family's members share the pipeline, and the compute work of all but
// recompute, dispatcher and precision (ComputeWorkOf reads no arrangement,
// EP or TP overlap, or FSDP), and memory reads neither arrangement nor TP
// overlap. So, per variant: its peak once (for all its arrangements), and
// when it fits, the step-time bound once per compute key: the variant's
// members are then reported together when they do not fit or are pruned.
// The rest are scored member by member, arrangement-major (the placement
// and its collective timings computed once per arrangement), under the
// bound of the moment: a member is first held to its compute key's bound
// with the communication floor of its arrangement (StepTimeLowerBoundWithComm,
// one floor plan per CommFloorVariant and arrangement), and scored in full
// only when that does not prune it, its plan copied from its variant's
// without recomputation on the arrangement (one plan for all its recompute
// modes: AddRecomputeCalls). Under a schedule where the bound grows with the
// recomputation, a variant is pruned at once when the bound of its compute
// key without recomputation prunes. Every reported score is the member's
// Score bit for bit, or pruned under a bound the sink gave during the
// family (tests/costmodel_score_cache_test.cc).
void CostModel::ScoreFamily(const LayoutFamily& family, bool minimise_memory, ScoreSink& sink) const {
  const PipelineDescription& pipeline = CachedPipeline(family.base);
  thread_local FamilyPeakMemo peaks;
  peaks.Reset(memory_, family.base, pipeline);
  thread_local Layout l;  // assigned, so that its storage is kept from family to family
  l = family.base;
  struct Survivor {
    size_t variant;
    LayoutScore score;  // its peak, fitting
  };
  // The pipeline with one rank of each shape (what it holds): the bound
  // reads each rank's compute alone, in a max and a min over the ranks
  // (schedule.h), so a work of these ranks gives it bit for bit without
  // building every rank's.
  // Found once a bound is asked for (never while nothing can be pruned).
  thread_local PipelineDescription shapes;
  bool shaped = false;
  auto shapes_of_pipeline = [&]() -> const PipelineDescription& {
    if (!shaped) {
      shapes.schedule = pipeline.schedule;
      shapes.pp = pipeline.pp;
      shapes.vpp = pipeline.vpp;
      shapes.ranks.clear();
      for (const PipelineRank& r : pipeline.ranks) {
        if (std::find(shapes.ranks.begin(), shapes.ranks.end(), r) == shapes.ranks.end()) shapes.ranks.push_back(r);
      }
      shaped = true;
    }
    return shapes;
  };
  // One compute key's work on `shapes` and step-time bound, once a bound
  // is asked for (never while nothing can be pruned), and its work once a
  // member is scored in full.
  struct Compute {
    Recompute recompute;
    Dispatcher dispatcher;
    Precision precision;
    bool bounded = false;  // shape_work and computed.bound_s are the key's
    bool built = false;    // computed.work is the key's
    StepWork shape_work;   // on `shapes`: what the bounds read
    ComputedWork computed;
  };
  thread_local std::vector<Survivor> survivors;
  // The first `used` are this family's; the rest keep their works' storage.
  thread_local std::vector<Compute> computes;
  size_t used = 0;
  survivors.clear();
  // `l` set to the variant: its compute key's entry. The last one found
  // first: variants come in search order, the recompute mode outermost, so
  // neighbours share the key or the key found before.
  size_t last_key = 0;
  auto same_key = [](const Compute& c, const RecipeVariant& v) {
    return c.dispatcher == v.dispatcher && c.precision == v.precision && c.recompute == v.recompute;
  };
  auto compute_of = [&](const RecipeVariant& v) -> Compute& {
    if (last_key < used && same_key(computes[last_key], v)) return computes[last_key];
    for (size_t i = used; i-- > 0;) {
      if (same_key(computes[i], v)) return computes[last_key = i];
    }
    if (used == computes.size()) computes.emplace_back();
    last_key = used;
    Compute& c = computes[used++];
    c.recompute = v.recompute;
    c.dispatcher = v.dispatcher;
    c.precision = v.precision;
    c.bounded = false;
    c.built = false;
    return c;
  };
  // Variant i's compute key (by index into computes), found once per
  // family: a recipe family has hundreds of variants and dozens of keys.
  thread_local std::vector<int> key_of;
  key_of.assign(family.variants.size(), -1);
  auto compute_at = [&](size_t i) -> Compute& {
    if (key_of[i] < 0) key_of[i] = static_cast<int>(&compute_of(family.variants[i]) - computes.data());
    return computes[static_cast<size_t>(key_of[i])];
  };
  // `l` set to the key's variant: the entry with its bound.
  auto bounded = [&](Compute& c) -> Compute& {
    if (!c.bounded) {
      ComputeWorkOf(l, shapes_of_pipeline(), true, &c.shape_work);
      c.computed.bound_s = PipelineLowerBound(c.shape_work);
      c.bounded = true;
    }
    return c;
  };
  auto computed_of = [&](size_t i) -> ComputedWork& {
    Compute& c = compute_at(i);
    if (!c.built) {
      ComputeWorkOf(l, pipeline, true, &c.computed.work);
      c.built = true;
    }
    return c.computed;
  };
  // Where the bound grows with the recomputation (schedule.h), that of the
  // variant's compute key without recomputation is below each of its
  // recompute modes' bounds: when that prunes, their own are not needed.
  const bool floor_by_none = LowerBoundGrowsWithRecompute(pipeline.schedule);
  // The bound of the whole family's compute (FamilyStepTimeLowerBound over
  // its variants' dispatchers and precisions), once a bound is asked for:
  // no variant's own bound is lower, so when it prunes, theirs are not
  // needed. Over one dispatcher and precision it would add nothing the
  // variants' shared compute keys do not already give (they share the
  // key without recomputation, floor_of), so it is left at 0 there.
  double family_bound_s = std::numeric_limits<double>::quiet_NaN();
  auto family_bound = [&] {
    if (std::isnan(family_bound_s)) {
      uint32_t dispatchers = 0, precisions = 0;
      for (const RecipeVariant& v : family.variants) {
        dispatchers |= 1u << static_cast<unsigned>(v.dispatcher);
        precisions |= 1u << static_cast<unsigned>(v.precision);
      }
      if (std::has_single_bit(dispatchers) && std::has_single_bit(precisions)) return family_bound_s = 0.0;
      thread_local StepWork least;
      BuildLeastStepWork(l, model_, cluster_.gpu, shapes_of_pipeline(), LeastBlocksOf(l, dispatchers, precisions, true),
                         MicroBatchesPerStep(job_, l), &least);
      family_bound_s = LeastPipelineLowerBound(least);
    }
    return family_bound_s;
  };
  auto floor_of = [&](const RecipeVariant& v) {
    RecipeVariant none = v;
    none.recompute = Recompute::None();
    l.recompute = none.recompute;
    const double bound_s = bounded(compute_of(none)).computed.bound_s;
    l.recompute = v.recompute;
    return bound_s;
  };
  LayoutScore peak;
  const RecipeVariant* peak_of = nullptr;
  for (size_t v = 0; v < family.variants.size(); ++v) {
    const uint64_t members = family.MembersOf(v);
    if (members == 0) continue;
    const RecipeVariant& variant = family.variants[v];
    LayoutFamily::SetVariant(variant, &l);
    if (!peak_of || !SameMemory(*peak_of, variant)) {
      peak = PeakScore(peaks.PeakBytes(l));
      peak_of = &variant;
    }
    LayoutScore score = peak;
    if (!score.fits) {
      sink.ScoredAlike(score, members);
      continue;
    }
    const double prune_above = sink.PruneAbove();
    bool pruned = false;
    if (minimise_memory) {
      pruned = score.peak_memory_gib > prune_above;
    } else if (prune_above < kNoPruning) {
      pruned = family_bound() > prune_above ||
               (floor_by_none && !variant.recompute.none() && floor_of(variant) > prune_above) ||
               bounded(compute_at(v)).computed.bound_s > prune_above;
    }
    if (pruned) {
      score.pruned = true;
      sink.ScoredAlike(score, members);
      continue;
    }
    survivors.push_back({v, score});
  }
  if (survivors.empty()) return;
  // The score reads an arrangement only through its group placement
  // (AddCommOf; memory and compute read neither order nor placement), so
  // the members of an arrangement placed as an earlier one take that one's
  // scores: each is its Score, or pruned (its bound above one at least the
  // current bound); pruning is never required (planner/scoring.h).
  // The plans of the arrangement in hand without recomputation, one per
  // recipe variant without it that is asked for, built when first asked: a
  // member's own (AddRecomputeCalls makes it the member's plan, so the
  // recompute modes of one variant share it), and a member's communication
  // floor, the plan of its CommFloorVariant (no recomputation, no EP or TP
  // overlap; a member without overlaps shares its own). A member's own ops
  // take at least as long as its floor's per block and per crossing
  // (comm_plan.h says why), so PipelineLowerBound(its compute key's shape
  // work, the floor's CommSeconds) bounds its step time, communication
  // included: one value per (floor, compute key), which the members
  // differing in overlaps share.
  struct Plan {
    RecipeVariant variant;  // without recomputation
    std::vector<CommOp> ops;
    bool floors = false;         // seconds is its CommSeconds
    CommSeconds seconds;
    std::vector<double> bounds;  // the bound on each compute key's shape work (by index), NaN until asked
  };
  thread_local std::vector<Plan> plans;  // the first `plans_used` are the arrangement's
  size_t plans_used = 0;
  thread_local std::vector<int> floor_at;  // variant i's floor plan under the arrangement in hand, once found
  thread_local std::vector<int> own_at;    // and its own plan without recomputation
  // The plan of `none` (a variant without recomputation) on the arrangement
  // in hand (`l` set to it), placed as `placement`: its index in `plans`.
  auto plan_of = [&](const RecipeVariant& none, const LayoutPlacement& placement, CollectiveTimeMemo* memo) {
    size_t f = 0;
    while (f < plans_used && !(plans[f].variant == none)) ++f;
    if (f == plans_used) {
      if (plans_used == plans.size()) plans.emplace_back();
      Plan& added = plans[plans_used++];
      const RecipeVariant member = LayoutFamily::VariantOf(l);
      LayoutFamily::SetVariant(none, &l);
      CommPlanOf(l, placement, pipeline, memo, &added.ops);
      LayoutFamily::SetVariant(member, &l);
      added.variant = none;
      added.floors = false;
      added.bounds.clear();
    }
    return static_cast<int>(f);
  };
  // The bound with communication of a member of variant `i` under the
  // arrangement in hand (`l` set to it): its compute key's shape work with
  // its floor.
  auto comm_bound_of = [&](size_t i, const LayoutPlacement& placement, CollectiveTimeMemo* memo) -> double {
    const Compute& c = bounded(compute_at(i));
    const size_t key = static_cast<size_t>(&c - computes.data());
    if (floor_at[i] < 0) floor_at[i] = plan_of(CommFloorVariant(family.variants[i]), placement, memo);
    Plan& floor = plans[static_cast<size_t>(floor_at[i])];
    if (!floor.floors) {
      floor.seconds = CommSecondsOf(floor.ops, c.shape_work.mtp_moe);
      floor.floors = true;
    }
    if (floor.bounds.size() <= key) floor.bounds.resize(key + 1, std::numeric_limits<double>::quiet_NaN());
    if (std::isnan(floor.bounds[key])) floor.bounds[key] = PipelineLowerBound(c.shape_work, floor.seconds);
    return floor.bounds[key];
  };
  // Variant i's own plan without recomputation under the arrangement in hand.
  auto own_plan_of = [&](size_t i, const LayoutPlacement& placement, CollectiveTimeMemo* memo) {
    if (own_at[i] < 0) {
      RecipeVariant none = family.variants[i];
      none.recompute = Recompute::None();
      own_at[i] = plan_of(none, placement, memo);
    }
    return &plans[static_cast<size_t>(own_at[i])].ops;
  };
  thread_local std::vector<LayoutPlacement> placed;  // per arrangement scored, when placed
  thread_local std::vector<size_t> scored_at;        // their indices
  thread_local std::vector<LayoutScore> scores;      // [scored arrangement][survivor]
  placed.clear();
  scored_at.clear();
  scores.clear();
  for (size_t a = 0; a < family.arrangements.size(); ++a) {
    LayoutFamily::SetArrangement(family.arrangements[a], &l);
    CollectiveTimeMemo* memo = nullptr;
    const LayoutPlacement* placement = PlacementOf(l, &memo);
    size_t same = scored_at.size();  // an earlier arrangement placed alike, if any
    for (size_t i = 0; placement && i < scored_at.size() && same == scored_at.size(); ++i) {
      if (placed[i] == *placement) same = i;
    }
    const bool reuse = same < scored_at.size();
    // Its scores kept for a later arrangement placed alike, if any.
    const bool record = !reuse && placement && a + 1 < family.arrangements.size();
    if (record) {
      placed.push_back(*placement);
      scored_at.push_back(a);
      scores.resize(scores.size() + survivors.size());
    }
    plans_used = 0;
    floor_at.assign(family.variants.size(), -1);
    own_at.assign(family.variants.size(), -1);
    for (size_t k = 0; k < survivors.size(); ++k) {
      const Survivor& s = survivors[k];
      if (!family.Legal(a, s.variant)) continue;
      const RecipeVariant& variant = family.variants[s.variant];
      LayoutFamily::SetVariant(variant, &l);
      if (reuse && family.Legal(scored_at[same], s.variant)) {
        sink.Scored(l, scores[same * survivors.size() + k]);
        continue;
      }
      const double prune_above = sink.PruneAbove();
      LayoutScore score = s.score;
      if (!minimise_memory && prune_above < kNoPruning) {
        // The compute-only bound first: it may prune without a floor plan
        // (and FinishScore reads it).
        score.pruned = bounded(compute_at(s.variant)).computed.bound_s > prune_above ||
                       (placement && comm_bound_of(s.variant, *placement, memo) > prune_above);
      }
      if (!score.pruned) {
        ComputedWork* computed = minimise_memory ? nullptr : &computed_of(s.variant);
        // Its plan from its variant's without recomputation, unless memory
        // prunes it first (FinishScore) or it cannot be placed (no plan).
        const bool planned = placement && !(minimise_memory && s.score.peak_memory_gib > prune_above);
        score = FinishScore(l, pipeline, s.score, minimise_memory, prune_above, computed,
                            planned ? own_plan_of(s.variant, *placement, memo) : nullptr);
      }
      if (record) scores[(scored_at.size() - 1) * survivors.size() + k] = score;
      sink.Scored(l, score);
    }
  }
}

}  // namespace foldplan
