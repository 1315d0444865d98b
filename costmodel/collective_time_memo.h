// CollectiveTimeMemo: the collective timings of a communication plan
// (comm_plan.h's CollectiveTime and RankTrafficOf of each op) memoised per
// placement, bit for bit (tests/costmodel_score_cache_test.cc).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "costmodel/collective.h"
#include "costmodel/comm_plan.h"
#include "planner/group_placement.h"

namespace foldplan {

// Memoises the timing of the plan's ops for one placement and one set of
// communication parameters. Key: the op's group kind, collective and bytes
// (a flex op: its NVLink and network bytes); value: CollectiveTime's (or
// ForwardedAllToAllTime's) cost and RankTrafficOf, pure functions of the
// key and the group's span and link sharing, which the placement fixes.
// Layouts that share a placement (they differ in micro-batch, VPP,
// recompute ...) time the same bytes on the same groups again, and so do
// placements that place some group kinds alike. The owner calls
// ChangePlacement whenever the placement changes, Clear when the
// parameters do. Bounded: kSlots entries, cleared when half full. Not
// thread-safe: one per thread.
//
// Under it, a second level keeps timings by what they read of a placement
// instead of by group kind: key the collective, bytes (and network bytes)
// and the group's span and link sharing (GroupPlacement::span,
// groups_sharing_links); it outlives ChangePlacement, so a timing on a span
// met before, under another placement or another group kind, is not
// computed again (the default search at 16,384 GPUs times ~1.5 k distinct
// keys ~290 k times when each placement starts afresh). Bounded:
// kSpanSlots entries, cleared when half full; Clear empties it too.
class CollectiveTimeMemo {
 public:
  struct Value {
    CollectiveCost cost;
    RankTraffic traffic;
  };
  // The value stored under the key, or null.
  const Value* Find(GroupKind group, int collective, double bytes, double network_bytes) const;
  // Stores the value; returns it as stored (valid until the next Put or Clear).
  const Value* Put(GroupKind group, int collective, double bytes, double network_bytes, const Value& value);
  // The second level: the value timed on `placed`'s span and link sharing
  // (any group kind), or null; and storing one there (returned as stored,
  // valid until the next PutOnSpan or Clear).
  const Value* FindOnSpan(int collective, double bytes, double network_bytes, const GroupPlacement& placed) const;
  const Value* PutOnSpan(int collective, double bytes, double network_bytes, const GroupPlacement& placed,
                         const Value& value);
  // Forgets every timing, both levels.
  void Clear();
  int size() const { return used_; }
  // For placement `after` in place of `before`: forgets the timings on the
  // group kinds the two place differently (their GroupPlacement, all a
  // timing reads of the placement), keeps the others'. Either null:
  // forgets all.
  void ChangePlacement(const LayoutPlacement* before, const LayoutPlacement* after);

  // ExpectedFlexCopies, memoised for its last arguments (one placement has
  // one TP x EP span). Key: experts, top_k, ep, etp and the span's domains,
  // min_per_domain and max_per_domain, all it reads; complete, so Clear
  // keeps it.
  const FlexTokenCopies& FlexCopies(int experts, int top_k, int ep, int etp, const GroupSpan& span);

  // Collective values, and this for a flex op's forwarded all-to-all.
  static constexpr int kForwarded = 255;

 private:
  static constexpr int kSlotBits = 8;
  static constexpr int kSlots = 1 << kSlotBits;
  struct Entry {
    uint32_t generation = 0;       // occupied while the memo's: Clear moves the memo's on
    uint16_t kind_generation = 0;  // live while its group kind's: ChangePlacement moves a kind's on
    uint8_t group = 0, collective = 0;
    uint64_t bytes = 0, network_bytes = 0;  // the doubles' bits
    Value value;
  };
  static size_t Slot(uint8_t group, uint8_t collective, uint64_t bytes, uint64_t network_bytes);
  void ClearFirstLevel();
  void ClearSpanLevel();
  std::array<Entry, kSlots> entries_{};
  uint32_t generation_ = 1;
  static constexpr int kSpanSlotBits = 11;
  static constexpr int kSpanSlots = 1 << kSpanSlotBits;
  struct SpanEntry {
    uint32_t generation = 0;  // occupied while span_generation_
    uint8_t collective = 0;
    int groups_sharing_links = 0;
    uint64_t bytes = 0, network_bytes = 0;  // the doubles' bits
    GroupSpan span;
    Value value;
  };
  static size_t SpanSlot(uint8_t collective, uint64_t bytes, uint64_t network_bytes, const GroupPlacement& placed);
  std::vector<SpanEntry> span_entries_;  // kSpanSlots once the first is stored
  uint32_t span_generation_ = 1;
  int span_used_ = 0;
  std::array<uint16_t, kGroupKindCount> kind_generations_{};
  int used_ = 0;  // occupied entries, live or not
  bool flex_known_ = false;
  std::array<int, 7> flex_key_{};  // FlexCopies' key
  FlexTokenCopies flex_copies_;
};

// The lookups, inline: the plan builder asks them for every op of every
// layout scored (in comm_plan.cc, another file).

namespace collective_time_memo {
// A double's bits: the memo tells keys apart exactly as they are.
inline uint64_t Bits(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}
}  // namespace collective_time_memo

inline size_t CollectiveTimeMemo::Slot(uint8_t group, uint8_t collective, uint64_t bytes, uint64_t network_bytes) {
  const uint64_t h = bytes * 0x9e3779b97f4a7c15ull ^ network_bytes * 0xc2b2ae3d27d4eb4full ^
                     (uint64_t{group} << 8 | collective) * 0x165667b19e3779f9ull;
  // The top bits: a product's depend on every bit of its factor, its low
  // bits only on the factor's low bits, which a double's often leaves zero.
  return static_cast<size_t>(h >> (64 - kSlotBits));
}

inline const CollectiveTimeMemo::Value* CollectiveTimeMemo::Find(GroupKind group, int collective, double bytes,
                                                         double network_bytes) const {
  const auto g = static_cast<uint8_t>(group), c = static_cast<uint8_t>(collective);
  const uint64_t b = collective_time_memo::Bits(bytes), n = collective_time_memo::Bits(network_bytes);
  const uint16_t kind_generation = kind_generations_[g];
  for (size_t i = Slot(g, c, b, n), probes = 0; probes < kSlots; i = (i + 1) % kSlots, ++probes) {
    const Entry& e = entries_[i];
    if (e.generation != generation_) return nullptr;
    if (e.bytes == b && e.group == g && e.collective == c && e.network_bytes == n &&
        e.kind_generation == kind_generation)
      return &e.value;
  }
  return nullptr;
}

inline size_t CollectiveTimeMemo::SpanSlot(uint8_t collective, uint64_t bytes, uint64_t network_bytes,
                                    const GroupPlacement& placed) {
  const GroupSpan& s = placed.span;
  const uint64_t shape = uint64_t(uint32_t(s.gpus)) | uint64_t(uint32_t(s.nodes)) << 32;
  const uint64_t spread = uint64_t(uint32_t(s.domains)) | uint64_t(uint32_t(s.max_per_domain)) << 32;
  const uint64_t h = bytes * 0x9e3779b97f4a7c15ull ^ network_bytes * 0xc2b2ae3d27d4eb4full ^
                     shape * 0x165667b19e3779f9ull ^ spread * 0xd6e8feb86659fd93ull ^
                     (uint64_t(uint32_t(placed.groups_sharing_links)) << 8 | collective) * 0x27d4eb2f165667c5ull;
  return static_cast<size_t>(h >> (64 - kSpanSlotBits));
}

inline const CollectiveTimeMemo::Value* CollectiveTimeMemo::FindOnSpan(int collective, double bytes, double network_bytes,
                                                               const GroupPlacement& placed) const {
  if (span_entries_.empty()) return nullptr;
  const auto c = static_cast<uint8_t>(collective);
  const uint64_t b = collective_time_memo::Bits(bytes), n = collective_time_memo::Bits(network_bytes);
  for (size_t i = SpanSlot(c, b, n, placed);; i = (i + 1) % kSpanSlots) {  // never full: a free slot ends it
    const SpanEntry& e = span_entries_[i];
    if (e.generation != span_generation_) return nullptr;
    if (e.bytes == b && e.collective == c && e.network_bytes == n &&
        e.groups_sharing_links == placed.groups_sharing_links && e.span == placed.span)
      return &e.value;
  }
}

}  // namespace foldplan

