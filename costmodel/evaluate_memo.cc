// CostModel's per-thread memos (evaluate_memo.h): the search run's group
// placements and plan parts (PlacementCache), the host work (HostWorkMemo),
// the pipeline description (PipelineMemo) and the least compute blocks of a
// family (LeastBlocksMemo), and the members that read through them. Each
// returns what the formula it stands for returns (evaluate.cc, comm_plan.cc,
// host_time.cc, planner/pipeline.cc), bit for bit.
#include <algorithm>
#include <array>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mix64.h"
#include "costmodel/collective_time_memo.h"
#include "costmodel/comm_plan.h"
#include "costmodel/compute_time.h"
#include "costmodel/compute_time_memo.h"
#include "costmodel/evaluate.h"
#include "costmodel/evaluate_memo.h"
#include "costmodel/host_time.h"
#include "costmodel/schedule.h"
#include "planner/group_placement.h"
#include "planner/pipeline.h"

namespace foldplan {
namespace {

// PlacementOf's: the placements of the search run in hand, the placements
// of group kinds under them (GroupPlacementCache: the same TP, EP, CP ...
// groups recur across pp, dp and orders), the current placement's
// collective timings, and under each kept placement parts of the plans
// made on it (CommPlanOf): their per-layer ops and their step ops.
struct PlacementCache {
  // Key: the fields PlaceGroups reads, the run's and the rest.
  struct RunKey {
    int world = -1, pp = 0, tp = 0, cp = 0;  // world -1: no run yet
    bool operator==(const RunKey&) const = default;
  };
  struct Key {
    int dp = 0, ep = 0, etp = 0;
    Placement placement = Placement::kLinear;
    std::string order;
  };
  static RunKey RunOf(const Layout& l) { return {l.world, l.pp, l.tp, l.cp}; }
  static bool Same(const Key& k, const Layout& l) {
    return k.dp == l.dp && k.ep == l.ep && k.etp == l.etp && k.placement == l.placement && k.order == l.order;
  }
  // A search walks its layouts in runs of one (world, pp, tp, cp)
  // (planner/enumerate.h RunsOf): each vpp and schedule in turn, over the
  // same dp, ep, etp and arrangements in the same order. The placements of
  // a run's fitting layouts for DeepSeek-V3 at 16,384 GPUs: up to 80 (the
  // default job), 369 (the widened one); 96 at 131,072. So the run's
  // placements are kept, up to kMaxKept (then dropped and kept afresh),
  // all dropped when the run changes; the one kept after the current is
  // looked at first.
  static constexpr size_t kMaxKept = 512;  // 2.5 kB each
  // Per-layer ops (BuildLayerCommOps) of one LayerCommKey on a kept
  // placement: `count` ops from `begin` in `ops`. The plans of the
  // layouts of a run placed alike that differ only in their pipeline share
  // them. Bounded: kMaxLayerOps ops in all (128 B each: 2 MiB) and
  // kMaxKeysPerPlacement keys per placement (found by a scan; the default
  // job plans 2 keys per placement, the widened one 8: its micro-batch
  // sizes and CP styles; with every recipe option a cap of 64 made the
  // search at 16,384 GPUs take ~6 % more CPU than without the sharing, 8
  // ~4 % less); past either, plans are built whole.
  static constexpr size_t kMaxLayerOps = 16384;
  static constexpr size_t kMaxKeysPerPlacement = 8;
  struct LayerOps {
    LayerCommKey key;
    size_t begin = 0, count = 0;
  };
  struct Kept {
    Key key;
    LayoutPlacement placed;
    bool ok = false;
    std::vector<LayerOps> layer_ops;
    // The step ops (AddStepCommOps) of the last pipeline planned on it
    // without FSDP, and its ranks: they read of the layout only tp, ep and
    // etp (the placement's) and of the pipeline its ranks, so the layouts
    // of a work item's micro-batch sizes, met in turn, share them.
    bool step_known = false;
    std::vector<PipelineRank> step_ranks;
    std::vector<CommOp> step_ops;
  };
  RunKey run;
  std::vector<Kept> kept;  // the first `used` are the run's; the rest keep their storage
  size_t used = 0;
  size_t current = 0;  // into kept, when used > 0: PlacementOf's last
  std::vector<CommOp> ops;
  GroupPlacementCache kinds;
  CollectiveTimeMemo timings;
  void DropRun() {
    used = 0;
    ops.clear();
  }
  void Clear() {
    kinds.Clear();
    timings.Clear();
    run = {};
    DropRun();
  }
  PlacementCache() {
    kept.reserve(kMaxKept);  // never moved: PlacementOf returns pointers into it
    Clear();
  }
};

// HostWorkOf per thread, by HostKey (what it reads of a layout: a search's
// layouts share few keys, since it holds the degrees only as whether they
// exceed 1). Bounded: cleared at kMaxEntries (about 400 B each).
class HostWorkMemo {
 public:
  const HostWork& Get(const Layout& l, const CostContext& ctx) {
    const HostKey key = HostKeyOf(l, *ctx.model);
    if (last_ && last_->first == key) return last_->second;
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      if (entries_.size() >= kMaxEntries) entries_.clear();
      it = entries_.emplace(key, HostWorkOf(key, ctx)).first;
    }
    last_ = &*it;
    return it->second;
  }
  void Clear() {
    entries_.clear();
    last_ = nullptr;
  }

 private:
  static constexpr size_t kMaxEntries = 4096;
  struct Hash {
    size_t operator()(const HostKey& k) const {
      const uint64_t flags = uint64_t(k.tp) | uint64_t(k.tp_cp) << 1 | uint64_t(k.ep) << 2 | uint64_t(k.ep_tp) << 3 |
                             uint64_t(k.etp) << 4 | uint64_t(k.ulysses) << 5 | uint64_t(k.a2a_overlap) << 6 |
                             uint64_t(k.tp_overlap) << 7 | uint64_t(k.recompute.full()) << 8 |
                             uint64_t(k.dispatcher) << 9 | uint64_t(k.precision) << 12 |
                             uint64_t(k.cuda_graphs.scope()) << 16 | uint64_t(k.cuda_graphs.modules()) << 18 |
                             uint64_t(k.recompute.modules()) << 24;
      return static_cast<size_t>(
          Mix64(flags ^ (uint64_t(uint32_t(k.local_experts)) << 32 | uint32_t(k.ring_steps))));
    }
  };
  std::unordered_map<HostKey, HostWork, Hash> entries_;
  const std::pair<const HostKey, HostWork>* last_ = nullptr;
};

}  // namespace

const HostWork& CostModel::HostOf(const Layout& layout, bool cached) const {
  if (cached) return ThreadMemo<HostWorkMemo>(id_).Get(layout, ctx_);
  thread_local HostWork direct;
  direct = HostWorkOf(layout, ctx_);
  return direct;
}

// Group placement depends only on the degrees, order and placement, and is
// most of a layout's scoring time; each thread keeps the placements of
// the search run in hand (PlacementCache). The collective timings of the
// current placement go with it (CollectiveTimeMemo), and of the group
// kinds the next one places alike, stay.
const LayoutPlacement* CostModel::PlacementOf(const Layout& l, CollectiveTimeMemo** memo) const {
  PlacementCache& cache = ThreadMemo<PlacementCache>(id_);
  *memo = &cache.timings;
  const PlacementCache::RunKey run = PlacementCache::RunOf(l);
  size_t found = cache.used;
  if (run == cache.run && cache.used > 0) {
    if (PlacementCache::Same(cache.kept[cache.current].key, l)) {
      const PlacementCache::Kept& k = cache.kept[cache.current];
      return k.ok ? &k.placed : nullptr;
    }
    const size_t after = cache.current + 1;
    if (after < cache.used && PlacementCache::Same(cache.kept[after].key, l)) found = after;
    for (size_t i = 0; i < cache.used && found == cache.used; ++i) {
      if (PlacementCache::Same(cache.kept[i].key, l)) found = i;
    }
  }
  const PlacementCache::Kept* before =
      cache.used > 0 && cache.kept[cache.current].ok ? &cache.kept[cache.current] : nullptr;
  if (found == cache.used) {
    if (!(run == cache.run) || cache.used == PlacementCache::kMaxKept) {
      // Slots are refilled from the first, the current's among them: the
      // timings forget every kind.
      cache.DropRun();
      cache.run = run;
      before = nullptr;
      found = 0;
    }
    if (found == cache.kept.size()) cache.kept.emplace_back();
    PlacementCache::Kept& k = cache.kept[found];
    k.key.dp = l.dp;
    k.key.ep = l.ep;
    k.key.etp = l.etp;
    k.key.placement = l.placement;
    k.key.order = l.order;
    k.layer_ops.clear();
    k.step_known = false;
    k.ok = PlaceGroups(l, topology_, &cache.kinds, &k.placed).ok();
    ++cache.used;
  }
  const PlacementCache::Kept& k = cache.kept[found];
  cache.timings.ChangePlacement(before ? &before->placed : nullptr, k.ok ? &k.placed : nullptr);
  cache.current = found;
  return k.ok ? &k.placed : nullptr;
}

void CostModel::CommPlanOf(const Layout& l, const LayoutPlacement& placement, const PipelineDescription& pipeline,
                           CollectiveTimeMemo* memo, std::vector<CommOp>* ops) const {
  PlacementCache& cache = ThreadMemo<PlacementCache>(id_);
  PlacementCache::Kept* k = cache.used > 0 && &cache.kept[cache.current].placed == &placement
                                ? &cache.kept[cache.current]
                                : nullptr;
  if (!k) return BuildCommPlan(l, ctx_, placement, pipeline, memo, ops);
  const LayerCommKey key = LayerCommKeyOf(l);
  auto shared = std::find_if(k->layer_ops.begin(), k->layer_ops.end(),
                             [&](const PlacementCache::LayerOps& o) { return o.key == key; });
  if (shared != k->layer_ops.end()) {
    const auto first = cache.ops.begin() + static_cast<std::ptrdiff_t>(shared->begin);
    ops->assign(first, first + static_cast<std::ptrdiff_t>(shared->count));
  } else {
    BuildLayerCommOps(l, ctx_, placement, memo, ops);
    if (cache.ops.size() + ops->size() <= PlacementCache::kMaxLayerOps &&
        k->layer_ops.size() < PlacementCache::kMaxKeysPerPlacement) {
      k->layer_ops.push_back({key, cache.ops.size(), ops->size()});
      cache.ops.insert(cache.ops.end(), ops->begin(), ops->end());
    }
  }
  if (!l.fsdp) {
    if (k->step_known && k->step_ranks == pipeline.ranks) {
      ops->insert(ops->end(), k->step_ops.begin(), k->step_ops.end());
    } else {
      const size_t layer_ops = ops->size();
      AddStepCommOps(l, ctx_, placement, pipeline, memo, ops);
      k->step_ops.assign(ops->begin() + static_cast<std::ptrdiff_t>(layer_ops), ops->end());
      k->step_ranks = pipeline.ranks;
      k->step_known = true;
    }
  }
  AddRecomputeCalls(l.recompute, ops);
}

namespace {

// Memoises DescribePipeline for one model and its block weights. Key: what
// it reads of a layout: pp, vpp, the schedule it runs, its stage_layers and
// stage_mtp. Per thread; bounded: cleared at kMaxEntries (each a
// description of pp x vpp stages, a few KB at most).
class PipelineMemo {
 public:
  const PipelineDescription& Get(const Layout& l, const ModelSpec& model, const BlockWeights& weights) {
    const PipelineSchedule schedule = ScheduleOf(l);
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {  // newest first
      const Entry& e = *it;
      if (e.pp == l.pp && e.vpp == l.vpp && e.schedule == schedule && e.stage_layers == l.stage_layers &&
          e.stage_mtp == l.stage_mtp)
        return e.pipeline;
    }
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_.push_back({l.pp, l.vpp, schedule, l.stage_layers, l.stage_mtp, DescribePipeline(l, model, &weights)});
    return entries_.back().pipeline;
  }
  void Clear() { entries_.clear(); }

 private:
  static constexpr size_t kMaxEntries = 64;
  struct Entry {
    int pp, vpp;
    PipelineSchedule schedule;
    std::vector<int> stage_layers, stage_mtp;
    PipelineDescription pipeline;
  };
  std::vector<Entry> entries_;  // few distinct pipelines per search
};

}  // namespace

const PipelineDescription& CostModel::CachedPipeline(const Layout& layout) const {
  return ThreadMemo<PipelineMemo>(id_).Get(layout, model_, weights_);
}

namespace {

// CostModel::LeastBlocksOf's memo, per thread and model. Key: what it
// reads of the layout (tp, cp, ep, etp, mbs, cp_style) and the two bit
// sets. A search meets each key for every (pp, vpp, schedule) of one (tp,
// cp), and for the layouts of every dp, so the memo is kept large: the
// widened search with every recipe option at 16,384 GPUs asks 274 k times
// and computes 63 k with 65,536 entries, 129 k with 16,384. Bounded:
// cleared at kMaxEntries (~150 B each, 10 MB).
struct LeastBlocksMemo {
  using Key = std::array<int32_t, 8>;
  struct KeyHash {
    size_t operator()(const Key& key) const {
      uint64_t h = 0x9e3779b97f4a7c15ull;
      for (int32_t v : key) h ^= static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      return static_cast<size_t>(h);
    }
  };
  static constexpr size_t kMaxEntries = 65536;
  std::unordered_map<Key, LeastBlocks, KeyHash> entries;
  void Clear() { entries.clear(); }
};

}  // namespace

LeastBlocks CostModel::LeastBlocksOf(const Layout& layout, uint32_t dispatchers, uint32_t precisions,
                                     bool cached) const {
  const auto compute = [&] {
    LeastBlocks least;
    Layout l = layout;
    l.recompute = Recompute::None();
    // dp 1: the most micro-batches per step, so the least share of the FP8
    // weight casts per micro-batch (1 / m, m = global batch / (dp mbs) at
    // least that of any dp); the rest of the compute reads no dp.
    l.dp = 1;
    for (int d = 0; d < kDispatcherCount; ++d) {
      if ((dispatchers >> d & 1u) == 0) continue;
      l.dispatcher = static_cast<Dispatcher>(d);
      for (int p = 0; p < kPrecisionCount; ++p) {
        if ((precisions >> p & 1u) == 0) continue;
        l.precision = static_cast<Precision>(p);
        if (cached) {
          least.Include(ThreadMemo<ComputeTimesCache>(id_).Get(l, ctx_), model_.mtp_layer_is_moe());
        } else {
          least.Include(ComputeLayerTimes(l, ctx_), model_.mtp_layer_is_moe());
        }
      }
    }
    return least;
  };
  if (!cached) return compute();
  LeastBlocksMemo& memo = ThreadMemo<LeastBlocksMemo>(id_);
  const LeastBlocksMemo::Key key = {layout.tp,
                                    layout.cp,
                                    layout.ep,
                                    layout.etp,
                                    layout.mbs,
                                    static_cast<int32_t>(layout.cp_style),
                                    static_cast<int32_t>(dispatchers),
                                    static_cast<int32_t>(precisions)};
  if (auto it = memo.entries.find(key); it != memo.entries.end()) return it->second;
  if (memo.entries.size() >= LeastBlocksMemo::kMaxEntries) memo.entries.clear();
  return memo.entries.emplace(key, compute()).first->second;
}

}  // namespace foldplan
