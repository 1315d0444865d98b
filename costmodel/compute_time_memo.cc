// ComputeTimesCache (compute_time_memo.h): ComputeLayerTimes's two stages
// (compute_time_parts.h) memoised, the shared stage by its own key.
#include "costmodel/compute_time_memo.h"

#include <algorithm>

#include "costmodel/compute_profile.h"
#include "costmodel/compute_time_parts.h"

namespace foldplan {

using compute_parts::Assemble;
using compute_parts::ComputeShared;
using compute_parts::PutWeightCastsOf;
using compute_parts::Rates;
using compute_parts::SharedTimes;

namespace {

template <size_t N>
size_t HashWords(const std::array<int64_t, N>& key) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int64_t v : key) h ^= static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return static_cast<size_t>(h);
}

}  // namespace

// ComputeTimesCache's second level: ComputeShared memoised. Key: the fields
// it reads (tp, cp, mbs, cp_style, the precision). A search meets each for
// many (ep, etp, dispatcher), which most of ComputeTimesCache's keys differ
// in. Bounded: cleared at kMaxEntries (~2 KB each).
struct ComputeTimesCache::Shared {
  using Key = std::array<int64_t, 5>;
  struct KeyHash {
    size_t operator()(const Key& key) const { return HashWords(key); }
  };
  static constexpr size_t kMaxEntries = 2048;
  std::unordered_map<Key, SharedTimes, KeyHash> entries;

  const SharedTimes& Get(const Layout& layout, const CostContext& ctx, const Rates& rates) {
    const Key key = {layout.tp, layout.cp, layout.mbs, static_cast<int64_t>(layout.cp_style),
                     static_cast<int64_t>(layout.precision)};
    auto it = entries.find(key);
    if (it != entries.end()) return it->second;
    if (entries.size() >= kMaxEntries) entries.clear();
    SharedTimes& s = entries[key];
    ComputeShared(layout, ctx, rates, &s);
    return s;
  }
};

ComputeTimesCache::Key ComputeTimesCache::KeyOf(const Layout& l) {
  return {l.tp, l.cp, l.ep, l.etp, l.mbs, static_cast<int64_t>(l.cp_style), static_cast<int64_t>(l.dispatcher),
          static_cast<int64_t>(l.precision)};
}

size_t ComputeTimesCache::KeyHash::operator()(const Key& key) const { return HashWords(key); }

ComputeTimesCache::ComputeTimesCache(size_t max_entries)
    : max_entries_(std::max<size_t>(1, max_entries)),
      rates_(std::make_unique<ComputeRateMemo>()),
      shared_(std::make_unique<Shared>()) {}
ComputeTimesCache::~ComputeTimesCache() = default;
ComputeTimesCache::ComputeTimesCache(ComputeTimesCache&&) noexcept = default;
ComputeTimesCache& ComputeTimesCache::operator=(ComputeTimesCache&&) noexcept = default;

void ComputeTimesCache::Clear() {
  bases_.clear();
  shared_->entries.clear();
  rates_->Clear();  // another context may come next
}

const ComputeTimes& ComputeTimesCache::Get(const Layout& layout, const CostContext& ctx) {
  const Key key = KeyOf(layout);
  // The micro-batches per step share out the FP8 weight casts only.
  const bool fp8 = Fp8CastBytesOf(layout.precision).activation_bytes_per_element > 0;
  const long long microbatches = fp8 ? MicroBatchesPerStep(*ctx.job, layout) : 0;
  auto base = bases_.find(key);
  if (base == bases_.end()) {
    if (bases_.size() >= max_entries_) bases_.clear();
    // Computed in place: an entry is 2.5 KB.
    base = bases_.try_emplace(key).first;
    Base& b = base->second;
    const Rates rates{*ctx.profile, rates_.get()};
    const SharedTimes& shared = shared_->Get(layout, ctx, rates);
    b.times = Assemble(shared, layout, ctx, rates, &b.dense, &b.moe, &b.moe_weights);
    b.dense_weights = shared.dense.weights;
    b.microbatches = microbatches;
    b.applied = layout.recompute;
    b.sums_used = 1;
    b.sums[0] = {layout.recompute,
                 b.times.dense_layer.recompute_s,
                 b.times.dense_layer.recompute_flops,
                 b.times.moe_layer.recompute_s,
                 b.times.moe_layer.recompute_flops,
                 b.times.dense_layer.recompute_experts_s,
                 b.times.moe_layer.recompute_experts_s};
    return b.times;
  }
  Base& b = base->second;
  if (!(b.applied == layout.recompute)) b.Reapply(layout.recompute);
  if (b.microbatches != microbatches) {
    const Rates rates{*ctx.profile, rates_.get()};
    PutWeightCastsOf(layout, ctx, b.dense_weights, b.moe_weights, shared_->Get(layout, ctx, rates).mtp, &b.times);
    b.microbatches = microbatches;
  }
  return b.times;
}

// The recompute sums of `rc`, from the pieces in order (once per set, then
// from `sums`).
void ComputeTimesCache::Base::Reapply(Recompute rc) {
  LayerTimes& dense_layer = times.dense_layer;
  LayerTimes& moe_layer = times.moe_layer;
  for (int i = 0; i < sums_used; ++i) {
    const Sums& s = sums[static_cast<size_t>(i)];
    if (!(s.recompute == rc)) continue;
    dense_layer.recompute_s = s.dense_s, dense_layer.recompute_flops = s.dense_flops;
    moe_layer.recompute_s = s.moe_s, moe_layer.recompute_flops = s.moe_flops;
    dense_layer.recompute_experts_s = s.dense_experts_s, moe_layer.recompute_experts_s = s.moe_experts_s;
    applied = rc;
    return;
  }
  dense.Apply(rc, dense_layer);
  moe.Apply(rc, moe_layer);
  applied = rc;
  // Kept in the next slot, the oldest overwritten when all are used.
  const Sums s{rc,
               dense_layer.recompute_s,
               dense_layer.recompute_flops,
               moe_layer.recompute_s,
               moe_layer.recompute_flops,
               dense_layer.recompute_experts_s,
               moe_layer.recompute_experts_s};
  if (sums_used < static_cast<int>(sums.size())) {
    sums[static_cast<size_t>(sums_used++)] = s;
  } else {
    std::rotate(sums.begin(), sums.begin() + 1, sums.end());
    sums.back() = s;
  }
}

}  // namespace foldplan
