// ComputeTimesCache: ComputeLayerTimes (compute_time.h) memoised for one
// cost context, bit for bit (tests/costmodel_score_cache_test.cc).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "costmodel/compute_time.h"
#include "costmodel/cost_context.h"
#include "planner/layout.h"

namespace foldplan {

class ComputeRateMemo;

// Memoises ComputeLayerTimes for one context (use a cache with one context
// only). Key: the layout fields it reads but the recompute set and the
// micro-batches per step (tp, cp, ep, etp, mbs, cp_style, dispatcher,
// precision); pp, vpp, the order and the placement do not change a layer's
// compute, so a search reuses each entry across them. Each entry holds the
// times and the layers' pieces (LayerRecomputePieces), from which Get sums
// the layout's recompute set into the entry's times (kept until another set
// asks), and, under FP8, the weight elements from which Get times the
// weight casts for the layout's micro-batches per step (their one reader:
// dp and mbs share them out) when they differ from the entry's.
// Misses look rates up through a ComputeRateMemo, which keys share most
// shapes of, and take what does not read ep, etp or the dispatcher (the
// dense layer, a MoE layer's attention, the embedding, the output layer
// and the MTP projection) from a second memo keyed by the rest (at most
// 2,048 entries of about 2 KB), so a miss mostly times a MoE block. Not
// thread-safe: one per thread. Bounded: cleared when it would exceed
// `max_entries` entries of about 2.7 KB (8192: 22 MB; a DeepSeek-V3 search
// on 16,384 GPUs meets 4,371 keys, 714,068 with the recipe options).
class ComputeTimesCache {
 public:
  explicit ComputeTimesCache(size_t max_entries = 8192);
  ~ComputeTimesCache();
  ComputeTimesCache(ComputeTimesCache&&) noexcept;
  ComputeTimesCache& operator=(ComputeTimesCache&&) noexcept;
  // ComputeLayerTimes(layout, ctx), bit for bit; valid until the next Get.
  const ComputeTimes& Get(const Layout& layout, const CostContext& ctx);
  size_t size() const { return bases_.size(); }
  void Clear();

  using Key = std::array<int64_t, 8>;
  struct KeyHash {
    size_t operator()(const Key& key) const;
  };
  static Key KeyOf(const Layout& layout);

 private:
  struct Base {
    ComputeTimes times;  // recompute_s and recompute_flops those of `applied`
    LayerRecomputePieces dense, moe;
    Recompute applied;
    // The sums of the last few sets asked for (a search's families ask for
    // each of the job's sets in turn), as LayerRecomputePieces::Apply gave
    // them: copied back instead of summed again.
    struct Sums {
      Recompute recompute;
      double dense_s, dense_flops, moe_s, moe_flops;
      double dense_experts_s, moe_experts_s;
    };
    std::array<Sums, 4> sums;
    int sums_used = 0;
    // The FP8 weight casts: the micro-batches per step `times` has them
    // for (0 in bf16), and the layers' weight elements they cast.
    long long microbatches = 0;
    double dense_weights = 0, moe_weights = 0;
    void Reapply(Recompute rc);
  };
  struct Shared;  // compute_time_memo.cc: what keys differing in ep, etp and the dispatcher share
  size_t max_entries_;
  std::unordered_map<Key, Base, KeyHash> bases_;
  std::unique_ptr<ComputeRateMemo> rates_;  // for misses
  std::unique_ptr<Shared> shared_;          // for misses
};

}  // namespace foldplan
