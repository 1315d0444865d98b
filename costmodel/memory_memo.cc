// FamilyPeakMemo (memory_memo.h): the peaks of a family's memory variants
// from the stage shapes and terms memory.cc computes, sharing what the
// variants share and scoring only the stages that can be the worst.
#include "costmodel/memory_memo.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <limits>
#include <vector>

#include "core/mix64.h"
#include "costmodel/memory_terms.h"

namespace foldplan {

namespace {

bool NonNegativeFinite(double x) { return x >= 0 && x <= std::numeric_limits<double>::max(); }

// The fields a family shares (FamilyPeakMemo), for its debug check.
struct FamilyKey {
  int world, pp, vpp, tp, cp, dp, ep, etp, edp, mbs;
  CpStyle cp_style;
  PipelineSchedule schedule;
  std::vector<int> stage_layers, stage_mtp;
  bool operator==(const FamilyKey&) const = default;
};
[[maybe_unused]] FamilyKey KeyOf(const Layout& l) {  // debug builds only
  return {l.world, l.pp,  l.vpp, l.tp,       l.cp,       l.dp,                    l.ep,
          l.etp,   l.edp, l.mbs, l.cp_style, ScheduleOf(l), l.stage_layers, l.stage_mtp};
}

}  // namespace

struct FamilyPeakMemo::Cache {
  const MemoryModel* model = nullptr;
  const PipelineDescription* pipeline = nullptr;
#ifndef NDEBUG
  FamilyKey base;  // the family's, for the debug check
#endif

  // Key: the family.
  MemoryModel::FamilyTerms family;
  // A shape per distinct PipelineRank (ShapeStage at its first rank), and
  // each rank's index among them and its place: a rank's shape is its
  // PipelineRank's with its place (ShapeStage reads the stage only there).
  std::vector<MemoryModel::StageShape> held_shapes;
  std::vector<size_t> held_class;
  // What the held shapes were made of, but their places: ShapeStage reads
  // of the layout pp, tp, cp, dp, ep, etp, edp and of the family's terms
  // only those of these and the pipeline's ranks (not mbs, cp_style or the
  // schedule, which the places read), so the families that differ only
  // in those (a work item's micro-batch sizes, met one after the other)
  // keep them. Key: the model (MemoryModel::id_), the degrees and the
  // pipeline's ranks.
  struct ShapesKey {
    uint64_t model = 0;  // 0: none made
    int pp = 0, tp = 0, cp = 0, dp = 0, ep = 0, etp = 0, edp = 0;
    bool operator==(const ShapesKey&) const = default;
  };
  ShapesKey shapes_key;
  std::vector<PipelineRank> shapes_ranks;
  std::vector<MemoryModel::StagePlace> places;
  std::vector<size_t> candidate_stages;             // the stages that can be the worst (Reset's proof)
  std::vector<MemoryModel::StageShape> candidates;  // their shapes
  bool family_monotone = false;  // the family's factors of `inflight` are >= 0 and finite
  std::vector<MemoryModel::StageShape> all;  // every stage's, built when first needed
  std::vector<size_t> all_stages;            // 0 .. pp - 1
  // The held shapes have their FSDP terms (ShapeFsdp): made with them when
  // the last family had an FSDP layout, else given them at the first FSDP
  // layout met; kept with the shapes.
  bool fsdp_shaped = false;
  bool fsdp_met = false;  // the family has had an FSDP layout
  // Reset's scratch: the stages alike but for inflight, each with the
  // largest inflight met so far.
  struct Class {
    size_t held_class = 0;
    int p2p_peers = 0;
    double inflight = 0;
  };
  std::vector<Class> classes;

  // The shape of each stage in `stages`, into *shapes.
  void ShapesOf(const std::vector<size_t>& stages, std::vector<MemoryModel::StageShape>* shapes) const;
  const std::vector<MemoryModel::StageShape>& AllShapes();

  // The option terms, in their two parts (a layout's are LayersFor's and
  // DispatchFor's), each with whether its factors of `inflight` are >= 0
  // and finite.
  // ComputeDispatch's, per family: key (precision, dispatcher), at slot
  // precision x kDispatcherCount + dispatcher; an entry is the family's
  // when `made` is its number (`family_number`, one per Reset).
  uint64_t family_number = 0;
  struct Dispatch {
    uint64_t made = 0;
    bool monotone = false;
    MemoryModel::DispatchTerms terms;
  };
  std::array<Dispatch, size_t{kPrecisionCount} * kDispatcherCount> dispatch;
  // ComputeLayers', shared across families: Layer reads of a layout only
  // tp, cp, mbs, etp, the expert load (ExpertLoad, of ep), precision and
  // recompute. Key of a block: the model (MemoryModel::id_), (tp, cp, mbs,
  // etp) and the load's bits; within it (recompute, precision), at slot
  // index in the block's `recomputes` x kPrecisionCount + precision. The
  // families of one (tp, cp) meet a few dozen blocks, for every pp, vpp,
  // schedule, CP style and ep of one load; kLayerBlocks are kept,
  // direct-mapped by the key's hash (a block met again in another slot's
  // place is recomputed).
  struct LayerKey {
    uint64_t model = 0;  // 0: no block
    int tp = 0, cp = 0, mbs = 0, etp = 0;
    uint64_t load = 0;
    bool operator==(const LayerKey&) const = default;
  };
  struct Layers {
    bool ready = false;
    bool monotone = false;
    MemoryModel::LayerTerms terms;
  };
  struct LayerBlock {
    LayerKey key;
    std::vector<Recompute> recomputes;
    std::vector<Layers> slots;
  };
  static constexpr size_t kLayerBlocks = 512;
  std::vector<LayerBlock> layer_blocks = std::vector<LayerBlock>(kLayerBlocks);
  LayerBlock* layer_block = nullptr;  // the family's
  size_t last_recompute = 0;          // where the last layout's recompute is in its `recomputes`

  // The peak and worst stage of the other fsdp way of the last layout
  // PeakBytes scored where the shapes had their FSDP terms (the search asks
  // for a variant's two ways one after the other): that way's options and
  // family's number (none is 0), the key.
  struct OtherWay {
    uint64_t family = 0;
    Recompute recompute;
    Precision precision = Precision::kBF16;
    Dispatcher dispatcher = Dispatcher::kAllToAll;
    bool a2a_overlap = false, fsdp = false;
    double peak = 0;
    int worst_stage = 0;
  };
  OtherWay other_way;

  void FindLayerBlock(const Layout& base);
  const Layers& LayersFor(const Layout& layout);
  const Dispatch& DispatchFor(const Layout& layout);
};

void FamilyPeakMemo::Cache::FindLayerBlock(const Layout& base) {
  const LayerKey key{model->id_, base.tp, base.cp, base.mbs, base.etp,
                     std::bit_cast<uint64_t>(model->ExpertLoad(base))};
  uint64_t h = key.model;
  for (uint64_t x : {uint64_t(uint32_t(key.tp)), uint64_t(uint32_t(key.cp)), uint64_t(uint32_t(key.mbs)),
                     uint64_t(uint32_t(key.etp)), key.load}) {
    h = (h ^ x) * kSplitMix64Increment;
  }
  layer_block = &layer_blocks[Mix64(h) % kLayerBlocks];
  last_recompute = 0;
  if (!(layer_block->key == key)) {
    layer_block->key = key;
    layer_block->recomputes.clear();
    layer_block->slots.clear();
  }
}

const FamilyPeakMemo::Cache::Layers& FamilyPeakMemo::Cache::LayersFor(const Layout& layout) {
  LayerBlock& b = *layer_block;
  size_t r = last_recompute;
  if (r >= b.recomputes.size() || !(b.recomputes[r] == layout.recompute)) {
    r = 0;
    while (r < b.recomputes.size() && !(b.recomputes[r] == layout.recompute)) ++r;
    if (r == b.recomputes.size()) {
      b.recomputes.push_back(layout.recompute);
      b.slots.resize(b.recomputes.size() * kPrecisionCount);
    }
    last_recompute = r;
  }
  Layers& y = b.slots[r * kPrecisionCount + static_cast<size_t>(layout.precision)];
  if (!y.ready) {
    y.terms = model->ComputeLayers(layout);
    y.monotone = NonNegativeFinite(y.terms.dense.stored) && NonNegativeFinite(y.terms.moe.stored);
    y.ready = true;
  }
  return y;
}

const FamilyPeakMemo::Cache::Dispatch& FamilyPeakMemo::Cache::DispatchFor(const Layout& layout) {
  Dispatch& d = dispatch[static_cast<size_t>(layout.precision) * kDispatcherCount +
                         static_cast<size_t>(layout.dispatcher)];
  if (d.made != family_number) {
    d.terms = model->ComputeDispatch(layout, family);
    d.monotone = NonNegativeFinite(d.terms.mtp_row);
    d.made = family_number;
  }
  return d;
}

FamilyPeakMemo::FamilyPeakMemo() : cache_(std::make_unique<Cache>()) {}
FamilyPeakMemo::~FamilyPeakMemo() = default;
FamilyPeakMemo::FamilyPeakMemo(FamilyPeakMemo&&) noexcept = default;
FamilyPeakMemo& FamilyPeakMemo::operator=(FamilyPeakMemo&&) noexcept = default;

void FamilyPeakMemo::Reset(const MemoryModel& model, const Layout& base,
                           const PipelineDescription& pipeline) {
  if (!cache_) cache_ = std::make_unique<Cache>();  // moved from
  Cache& c = *cache_;
  c.model = &model;
  c.pipeline = &pipeline;
#ifndef NDEBUG
  c.base = KeyOf(base);
#endif
  c.family = model.ComputeFamily(base, pipeline);
  ++c.family_number;
  c.FindLayerBlock(base);

  // The stages that can be the worst. Stage q need not be scored when an
  // earlier stage r has a shape equal but for inflight and `stage` (which
  // ComputeStage does not read) and inflight_r >= inflight_q. Such are the
  // stages that hold the same PipelineRank and have as many point-to-point
  // peers: their shapes are one copy with PlaceStage's fields set anew.
  //  - Then every term of r is >= the same term of q. The terms of a stage
  //    differ from another's of the same shape only through inflight: the
  //    activations inflight x A, the embedding's inflight x E, the MTP
  //    terms (mtp_inflight x mtp) x X (mtp_inflight is 1 on both or
  //    inflight on both, `loss` being part of the shape) and the
  //    fragmentation f x (the left-to-right sum of short-lived terms,
  //    those among them). With A, E, X, f >= 0 and finite (`monotone`:
  //    checked on the family's and the options' factors, else every stage
  //    is scored), each is non-decreasing in inflight: rounding is
  //    monotone, so fl(a x) and fl(a + b) are non-decreasing in a for
  //    x >= 0.
  //  - So peak_r >= peak_q (the peak is the same left-to-right sum of the
  //    20 terms, fl(a + b) non-decreasing in a and in b).
  //  - MemoryModel::PeakBytes scans the stages in order and keeps the first
  //    strict maximum, starting below every peak: when it meets q, its
  //    running maximum is >= peak_r >= peak_q, so q never becomes the worst
  //    and never changes the running maximum. Leaving out such stages
  //    leaves the scan's every update, its peak and its worst stage, as
  //    they were.
  // The earliest stage of a shape with inflight the largest so far is kept:
  // a stage left out has an earlier kept one of its shape with inflight at
  // least its own (by induction over the stages).
  const Cache::ShapesKey shapes_key{model.id_, base.pp, base.tp, base.cp, base.dp, base.ep, base.etp, base.edp};
  const bool same_shapes = shapes_key == c.shapes_key && pipeline.ranks == c.shapes_ranks;
  if (!same_shapes) {
    c.shapes_key = shapes_key;
    c.shapes_ranks = pipeline.ranks;
    c.held_shapes.clear();
    c.held_class.clear();
    c.fsdp_shaped = c.fsdp_met;
  } else if (c.fsdp_met && !c.fsdp_shaped) {
    for (MemoryModel::StageShape& s : c.held_shapes) model.ShapeFsdp(c.family, &s);
    c.fsdp_shaped = true;
  }
  c.fsdp_met = false;
  c.places.clear();
  c.candidate_stages.clear();
  c.all.clear();
  c.classes.clear();
  c.family_monotone = NonNegativeFinite(c.family.rows) && NonNegativeFinite(c.family.embedding_per_microbatch) &&
                      NonNegativeFinite(c.family.mtp_logits) && NonNegativeFinite(model.a_.fragmentation) &&
                      model.model_.hidden >= 0;
  for (size_t p = 0; p < pipeline.ranks.size(); ++p) {
    if (!same_shapes) {
      const PipelineRank& held = pipeline.ranks[p];
      size_t h = 0;
      while (h < c.held_shapes.size() && !(c.held_shapes[h].held == held)) ++h;
      if (h == c.held_shapes.size()) {
        c.held_shapes.push_back(model.ShapeStage(base, c.family, static_cast<int>(p), held, c.fsdp_shaped));
      }
      c.held_class.push_back(h);
    }
    const size_t h = c.held_class[p];
    const MemoryModel::StagePlace& at = c.places.emplace_back(model.PlaceStage(base, c.family, static_cast<int>(p)));
    if (!NonNegativeFinite(at.inflight)) c.family_monotone = false;
    size_t k = 0;
    while (k < c.classes.size() && !(c.classes[k].held_class == h && c.classes[k].p2p_peers == at.p2p_peers)) ++k;
    if (k == c.classes.size()) {
      c.classes.push_back({h, at.p2p_peers, at.inflight});
    } else if (at.inflight > c.classes[k].inflight) {
      c.classes[k].inflight = at.inflight;
    } else {
      continue;
    }
    c.candidate_stages.push_back(p);
  }
  c.ShapesOf(c.candidate_stages, &c.candidates);
}

void FamilyPeakMemo::Cache::ShapesOf(const std::vector<size_t>& stages,
                                     std::vector<MemoryModel::StageShape>* shapes) const {
  shapes->clear();
  for (size_t p : stages) {
    shapes->push_back(held_shapes[held_class[p]]);
    shapes->back().Place(places[p]);
  }
}

const std::vector<MemoryModel::StageShape>& FamilyPeakMemo::Cache::AllShapes() {
  if (all.empty()) {
    all_stages.resize(places.size());
    std::iota(all_stages.begin(), all_stages.end(), size_t{0});
    ShapesOf(all_stages, &all);
  }
  return all;
}

double FamilyPeakMemo::PeakBytes(const Layout& layout, int* worst_stage) {
  Cache& c = *cache_;
  assert(c.model && KeyOf(layout) == c.base);
  const MemoryModel& model = *c.model;
  if (layout.fsdp) {
    c.fsdp_met = true;
    if (!c.fsdp_shaped) {
      for (MemoryModel::StageShape& s : c.held_shapes) model.ShapeFsdp(c.family, &s);
      c.ShapesOf(c.candidate_stages, &c.candidates);
      c.all.clear();
      c.fsdp_shaped = true;
    }
  }
  Cache::OtherWay& other = c.other_way;
  if (other.family == c.family_number && other.fsdp == layout.fsdp && other.recompute == layout.recompute &&
      other.precision == layout.precision && other.dispatcher == layout.dispatcher &&
      other.a2a_overlap == layout.a2a_overlap) {
    if (worst_stage) *worst_stage = other.worst_stage;
    return other.peak;
  }
  const Cache::Layers& y = c.LayersFor(layout);
  const Cache::Dispatch& o = c.DispatchFor(layout);
  // The other fsdp way too, where its shapes are ready: the layout of the
  // other way has the same stage terms but FsdpStageTerms', and scores the
  // same stages (the same option terms, so the same monotone checks).
  const bool both = c.fsdp_shaped;
  double worst = -1, other_worst = -1;
  int worst_at = 0, other_worst_at = 0;
  const std::vector<MemoryModel::StageShape>& shapes =
      c.family_monotone && y.monotone && o.monotone ? c.candidates : c.AllShapes();
  auto scan = [&](auto other_too) {
    for (const MemoryModel::StageShape& s : shapes) {
      // ComputeStage(layout, ...), in its two parts.
      MemoryModel::StageTerms t;
      model.OptionStageTerms(layout.a2a_overlap, c.family, y.terms, o.terms, s, &t);
      model.FsdpStageTerms(layout.fsdp, o.terms, s, &t);
      const double peak = t.peak();
      if (peak > worst) {
        worst = peak;
        worst_at = s.stage;
      }
      if constexpr (other_too) {
        model.FsdpStageTerms(!layout.fsdp, o.terms, s, &t);
        const double other_peak = t.peak();
        if (other_peak > other_worst) {
          other_worst = other_peak;
          other_worst_at = s.stage;
        }
      }
    }
  };
  if (both) {
    scan(std::true_type{});
  } else {
    scan(std::false_type{});
  }
  if (both) {
    other = {c.family_number, layout.recompute, layout.precision, layout.dispatcher,
             layout.a2a_overlap, !layout.fsdp, other_worst, other_worst_at};
  }
  if (worst_stage) *worst_stage = worst_at;
  return worst;
}

size_t FamilyPeakMemo::StagesScored() const {
  // The family's own conditions; an option with a negative factor (none
  // the model computes) would widen its own calls to every stage.
  return cache_->family_monotone ? cache_->candidates.size() : cache_->places.size();
}

}  // namespace foldplan
