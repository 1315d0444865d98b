// Enumeration of every legal layout of (cluster, model, job).
//
// The candidate space: world W = job.world_size (or every GPU); for each pp
// dividing W, each vpp in job.vpp, each pipeline schedule in
// job.pipeline_schedules (none listed: the implied one, left unnamed), tp
// and cp dividing G = W/pp, each CP style in job.cp_styles (one when
// cp == 1), ep and etp dividing G (a dense
// model: ep 1, etp = tp), each micro-batch size, each order in job.orders
// (one per distinct rank map when pp == 1), and each combination of the
// job's recipe candidates: recompute, dispatcher and EP overlap (for a dense
// model one of each: no EP overlap and a dispatcher other than HybridEP when
// the job lists one, else its first), precision, FSDP and TP overlap. A linear-placement
// layout whose heavy groups straddle NVLink domains also gets a
// packed-placement variant as a further candidate, wherever its linear
// version passes every rule before placement. Layers that do not divide
// over pp x vpp get the layout planner/pipeline.h's ChooseStageLayers builds
// (weighed by ctx.weights).
//
// Each rejected candidate is counted once, under the first rule it breaks in
// Rule order (planner/legality.h); whole subtrees are counted at once, so
// the count is exact without visiting every candidate.
//
// Pins (`plan --fix`, `enumerate --fix`) narrow the space to the layouts
// that agree with every pinned degree, placement and pipeline layout; the
// job's candidate lists carry the other pinned options (cli narrows them).
// With placement=packed pinned, rejections before the placement rule are
// counted once per linear candidate.
//
// Enumeration streams: each legal layout is handed to a visitor as it is
// found, so nothing grows with the number of legal layouts unless the
// caller collects them. The space splits into independent work items (one
// per pp, vpp, schedule, tp and cp, in search order) that threads can walk
// apart, each with its own LayoutEnumerator; the items' counts add up to
// the whole enumeration's, and their layouts, item after item, are
// EnumerateLayouts's in its order. An item can also be walked a family at a
// time (planner/layout_family.h: the layouts of one set of degrees, mbs,
// pipeline and CP style, with their legal arrangements and recipe
// variants), the recipe rules decided once per family: the search's way,
// which never visits layouts one by one unless its scorer asks to.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "planner/layout.h"
#include "planner/layout_family.h"
#include "planner/legality.h"

namespace foldplan {

// Called with each legal layout, in search order; the reference is valid
// only during the call.
using LayoutVisitor = std::function<void(const Layout&)>;
// Called with each family of legal layouts (at least one member), in search
// order; valid only during the call.
using FamilyVisitor = std::function<void(const LayoutFamily&)>;

struct EnumerateOptions {
  bool collect_layouts = true;       // false: only count (for --why and benchmarks)
  const LayoutPins* pins = nullptr;  // may be null: no pins
  LayoutVisitor visit = nullptr;     // may be empty; called whether or not layouts are collected
};

struct Enumeration {
  int world = 0;
  uint64_t candidates = 0;
  uint64_t legal_count = 0;
  std::array<uint64_t, kRuleCount> rejected{};  // indexed by Rule
  std::vector<Layout> legal;  // in search order, when collected
};

// ctx.cluster, ctx.model and ctx.job must be set.
Enumeration EnumerateLayouts(const LegalityContext& ctx, const EnumerateOptions& options = {});

// One independent part of the enumeration: the subtree of one (pp, vpp,
// schedule, tp, cp), or, when the world does not fit the cluster, all of
// one pp (vpp == 0), every candidate of which breaks the first rule.
struct EnumerationItem {
  int pp = 1;
  int vpp = 0;          // 0: the whole pp subtree, rejected by world_fits_cluster
  size_t schedule = 0;  // index into the job's schedules (or the implied one)
  int tp = 1;
  int cp = 1;
};

class EnumerationWalker;  // enumerate.cc

// Walks work items; one per thread (it caches the last pp's divisors,
// stages and order checks), reading only the context, which must outlive it.
class LayoutEnumerator {
 public:
  // ctx.cluster, ctx.model and ctx.job must be set; pins may be null.
  LayoutEnumerator(const LegalityContext& ctx, const LayoutPins* pins);
  LayoutEnumerator(const LegalityContext&& ctx, const LayoutPins* pins) = delete;  // it would dangle
  ~LayoutEnumerator();
  LayoutEnumerator(LayoutEnumerator&&) noexcept;
  LayoutEnumerator& operator=(LayoutEnumerator&&) noexcept;

  int world() const;
  // Every work item, in enumeration order (a search walks them in runs: RunsOf).
  std::vector<EnumerationItem> Items();
  // Adds the item's candidates and rejections to *counts (its `legal` is
  // left alone) and calls `visit` with each of its legal layouts.
  void Run(const EnumerationItem& item, Enumeration* counts, const LayoutVisitor& visit);
  // The same a family at a time: the families' members, in order, are the
  // layouts Run visits.
  void RunFamilies(const EnumerationItem& item, Enumeration* counts, const FamilyVisitor& visit);

 private:
  std::unique_ptr<EnumerationWalker> walker_;
};

// Work items in the order a search walks them (planner/search.cc): in runs
// of one (pp, tp, cp), the runs ordered by (pp, tp, cp), each
// run's items (its vpp and schedule) in their order in `items`. A thread
// walks a run whole, so a scorer's per-thread caches meet the run's
// degrees, placements and plans again for each vpp and schedule while they
// still hold them (costmodel/evaluate.cc).
struct ItemRuns {
  std::vector<EnumerationItem> items;  // run after run
  std::vector<size_t> starts;          // into items: each run's first, then items.size()
  size_t runs() const { return starts.empty() ? 0 : starts.size() - 1; }
};
ItemRuns RunsOf(const std::vector<EnumerationItem>& items);

// The job whose candidate lists hold only the pinned options (mbs, vpp,
// schedule, order, cp_style, recompute, dispatcher, overlaps, precision, FSDP) and
// whose world is the pinned one; the degree, placement and stage pins stay
// with EnumerateOptions::pins.
JobSpec PinnedJob(const JobSpec& job, const LayoutPins& pins);

// Positive divisors of n, ascending.
std::vector<int> Divisors(int n);

}  // namespace foldplan
