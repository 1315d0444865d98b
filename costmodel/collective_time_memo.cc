// CollectiveTimeMemo (collective_time_memo.h).
#include "costmodel/collective_time_memo.h"

#include <cstring>

namespace foldplan {

const CollectiveTimeMemo::Value* CollectiveTimeMemo::Put(GroupKind group, int collective, double bytes,
                                                        double network_bytes, const Value& value) {
  if (used_ >= kSlots / 2) ClearFirstLevel();  // at most half full: probes stay short
  const auto g = static_cast<uint8_t>(group), c = static_cast<uint8_t>(collective);
  const uint64_t b = collective_time_memo::Bits(bytes), n = collective_time_memo::Bits(network_bytes);
  // The first slot of the run from the key's that is free or holds a
  // forgotten entry (its kind's generation moved on): reusing those keeps
  // the runs short when ChangePlacement forgets a kind again and again.
  // Find probes past a forgotten entry, so any may be replaced.
  size_t i = Slot(g, c, b, n);
  while (entries_[i].generation == generation_ &&
         entries_[i].kind_generation == kind_generations_[entries_[i].group])
    i = (i + 1) % kSlots;
  if (entries_[i].generation != generation_) ++used_;
  entries_[i] = Entry{generation_, kind_generations_[g], g, c, b, n, value};
  return &entries_[i].value;
}

const CollectiveTimeMemo::Value* CollectiveTimeMemo::PutOnSpan(int collective, double bytes, double network_bytes,
                                                              const GroupPlacement& placed, const Value& value) {
  if (span_entries_.empty()) span_entries_.resize(kSpanSlots);
  if (span_used_ >= kSpanSlots / 2) ClearSpanLevel();  // at most half full: probes stay short
  const auto c = static_cast<uint8_t>(collective);
  const uint64_t b = collective_time_memo::Bits(bytes), n = collective_time_memo::Bits(network_bytes);
  size_t i = SpanSlot(c, b, n, placed);
  while (span_entries_[i].generation == span_generation_) i = (i + 1) % kSpanSlots;
  ++span_used_;
  span_entries_[i] = SpanEntry{span_generation_, c, placed.groups_sharing_links, b, n, placed.span, value};
  return &span_entries_[i].value;
}

void CollectiveTimeMemo::ChangePlacement(const LayoutPlacement* before, const LayoutPlacement* after) {
  if (!before || !after) return ClearFirstLevel();
  // The other kinds stay unplaced in every placement (group_placement.h).
  for (const GroupKind kind : kTimedGroupKinds) {
    if (before->of(kind) == after->of(kind)) continue;
    // A forgotten entry stays occupied (Find probes past it) until Put
    // reuses its slot or Clear. Wrapped around: entries of the kind's
    // generation 0 would come back to life.
    if (++kind_generations_[static_cast<size_t>(kind)] == 0) ClearFirstLevel();
  }
}

const FlexTokenCopies& CollectiveTimeMemo::FlexCopies(int experts, int top_k, int ep, int etp,
                                                      const GroupSpan& span) {
  const std::array<int, 7> key = {experts, top_k, ep, etp, span.domains, span.min_per_domain, span.max_per_domain};
  if (!flex_known_ || key != flex_key_) {
    flex_copies_ = ExpectedFlexCopies(experts, top_k, ep, etp, span);
    flex_key_ = key;
    flex_known_ = true;
  }
  return flex_copies_;
}

void CollectiveTimeMemo::Clear() {
  ClearFirstLevel();
  ClearSpanLevel();
}

void CollectiveTimeMemo::ClearSpanLevel() {
  if (span_used_ == 0) return;
  span_used_ = 0;
  if (++span_generation_ != 0) return;
  // Wrapped around: entries of generation 1 would come back to life.
  for (SpanEntry& e : span_entries_) e.generation = 0;
  span_generation_ = 1;
}

void CollectiveTimeMemo::ClearFirstLevel() {
  if (used_ == 0) return;
  used_ = 0;
  if (++generation_ != 0) return;  // every entry is of an earlier generation now
  // Wrapped around (after 2^32 clears): entries of generation 1 would
  // come back to life.
  for (Entry& e : entries_) e.generation = 0;
  generation_ = 1;
}

}  // namespace foldplan
