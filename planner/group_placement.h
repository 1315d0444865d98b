// Where a layout's process groups sit on the cluster, one worst case per
// group kind, computed without building the rank map (it is called for
// every layout a search scores: ~10^5 layouts on 16,384 GPUs).
//
// Why this is exact. Under a Megatron order string, a group of kind K is
// {b + o : o in O}, O the mixed-radix offsets of K's axes and b a base made
// of the other axes: every group is a translate of the group through rank 0.
// Rank r sits on GPU r (linear), or on GPU (r / R) x D + r % R (packed:
// R ranks per D-GPU domain). Shifting a rank by a multiple of
//   P = R x lcm(D, gpus per scalable unit) / D
// shifts its GPU by a multiple of the NVLink domain, node and scalable-unit
// sizes, so it changes no "same node / domain / SU / rail" relation: two
// groups whose bases are congruent modulo P have identical spans. One group
// per residue class of the bases therefore gives the exact worst case.
// The offsets themselves split as O = A + B, B the part made of multiples of
// P, so each class costs |A| steps rather than |O| (doc/cost-model-comm.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "planner/layout.h"
#include "planner/rank_map.h"
#include "topology/topology.h"

namespace foldplan {

struct GroupPlacement {
  GroupKind kind = GroupKind::kTp;
  int size = 1;     // ranks per group
  int groups = 0;   // groups of this kind (world / size)
  // The span of the group of this kind whose traffic is slowest (SlowerSpan).
  GroupSpan span;
  // Groups of this kind whose ranks share one node's NICs at once: the ranks
  // a node runs, over the worst group's ranks per node. 1 when the worst
  // group stays inside one NVLink domain (no NIC is used).
  int groups_sharing_links = 1;
  bool operator==(const GroupPlacement&) const = default;
};

// The kinds the communication model times.
inline constexpr std::array<GroupKind, 10> kTimedGroupKinds = {
    GroupKind::kTp, GroupKind::kCp, GroupKind::kTpCp, GroupKind::kDp, GroupKind::kDpCp,
    GroupKind::kEp, GroupKind::kEtp, GroupKind::kTpEp, GroupKind::kEdp, GroupKind::kPp,
};

struct LayoutPlacement {
  // Indexed by GroupKind; only kTimedGroupKinds are filled.
  std::array<GroupPlacement, kGroupKindCount> by_kind;
  const GroupPlacement& of(GroupKind kind) const { return by_kind[static_cast<int>(kind)]; }
  bool operator==(const LayoutPlacement&) const = default;
};

// Whether a group spanning `a` communicates more slowly than one spanning
// `b`: crossing the spine first, then leaving the NVLink domain, then fewer
// ranks in the emptiest domain (a larger network share for all-to-all and
// fewer NICs for a ring), then more domains, scalable units and nodes;
// fewer ranks in the fullest domain and fewer rails break the remaining
// ties. A strict weak order on every field but the tiers.
bool SlowerSpan(const GroupSpan& a, const GroupSpan& b);

// The worst-case placement of every timed group kind of `layout` on the
// topology's cluster. Errors as BuildRankMap's: degrees that do not multiply
// out, an order Megatron would refuse, a layout larger than the cluster, a
// packed placement that does not fit.
Result<LayoutPlacement> PlaceGroups(const Layout& layout, const Topology& topology);

// Memoises the worst case of one group kind, PlaceGroups' inner step, for one
// topology (use a cache with one topology only). Key: the kind's group
// offsets (the strides and sizes of the axes its groups vary over), the
// other axes' strides reduced modulo the rank period P with the number of
// distinct multiples each contributes, P, the ranks per domain of the
// placement, and the ranks a node runs: everything a kind's span, tiers and
// link sharing depend on (the header's "Why this is exact": the bases only
// matter modulo P). The same TP, EP, CP ... groups recur across pp, dp and
// orders, so a search places each once. Not thread-safe: one per thread.
// Bounded: cleared when it would exceed `max_entries` (each a GroupPlacement,
// 160 bytes, and its key).
//
// An open-addressing table (PlaceGroups looks up ten kinds per layout, so a
// lookup must cost little): the key is 32-bit words, every figure in it being
// at most the world size, hashed by a multiply per pair of words.
class GroupPlacementCache {
 public:
  explicit GroupPlacementCache(size_t max_entries = 8192) : max_entries_(max_entries) {}
  size_t size() const { return entries_.size(); }
  size_t hits() const { return hits_; }
  size_t misses() const { return misses_; }
  void Clear();

  // (P, ranks per domain, domain GPUs, ranks a node runs, masked digits,
  // then per masked digit its stride and size, then per unmasked digit that
  // P does not absorb its stride mod P and distinct multiples), zero-padded.
  // A kind varies over at most two axes and a generator has at most four of
  // size > 1 (group_placement.cc KindKeyOf).
  using Key = std::array<int32_t, 14>;
  // The placement of `key`, or null; valid until the next Put or Clear.
  const GroupPlacement* Find(const Key& key);
  // Stores one (clearing first when full); a key stored already keeps its own.
  void Put(const Key& key, const GroupPlacement& placement);

 private:
  struct Slot {
    Key key{};
    uint32_t entry = 0;  // 1 + index into entries_; 0: empty
  };
  // The slot that holds `key`, or the empty one where it would go.
  Slot& SlotOf(const Key& key);
  void Grow();

  size_t max_entries_;
  size_t hits_ = 0, misses_ = 0;
  std::vector<Slot> slots_;  // a power of two of them, at most half in use
  std::vector<GroupPlacement> entries_;
};

// The same, each kind looked up in `cache` first (null: none). Results are
// identical to the uncached call.
Result<LayoutPlacement> PlaceGroups(const Layout& layout, const Topology& topology, GroupPlacementCache* cache);
// The same into *out, a caller's (a LayoutPlacement is 2.5 KB: returning one
// in a Result copies it twice). Writes the timed kinds only: the others stay
// as they are (default in a fresh one). *out is unspecified after an error.
Status PlaceGroups(const Layout& layout, const Topology& topology, GroupPlacementCache* cache, LayoutPlacement* out);

}  // namespace foldplan
