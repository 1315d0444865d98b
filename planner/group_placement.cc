// Worst-case group spans per kind, from the mixed-radix structure of
// Megatron's groups (see the header for why one group per residue class of
// the bases suffices, and doc/cost-model-comm.md for the speed-ups).
#include "planner/group_placement.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/order_string.h"
#include "planner/legality.h"
#include "planner/placement.h"
#include "planner/rank_generator.h"
#include "topology/cluster_shape.h"

namespace foldplan {

namespace {

// SlowerSpan's order as a tuple, for GroupSpan and the counts below alike.
template <class Span>
auto SlownessKey(const Span& s) {
  return std::make_tuple(s.crosses_spine, s.domains > 1, -s.min_per_domain, s.domains, s.scalable_units,
                         s.nodes, -s.max_per_domain, -s.rails, s.gpus);
}

}  // namespace

bool SlowerSpan(const GroupSpan& a, const GroupSpan& b) { return SlownessKey(a) > SlownessKey(b); }

namespace {

using i64 = int64_t;

std::string Str(i64 v) { return std::to_string(v); }

// The cluster's index arithmetic is topology/cluster_shape.h (ClusterShape),
// rank -> GPU is PackBlocks' rule (rank r on GPU r, or ranks filling the
// first ranks_per_domain GPUs of each domain).
using Shape = ClusterShape;
using Placer = PackedBlocks;

// ---------------------------------------------------------------------------
// Counting a span.

// The fields of GroupSpan that SlowerSpan compares, without the tiers: the
// hot loop below evaluates hundreds of groups per layout and must not touch
// GroupSpan's vector.
struct SpanCounts {
  int gpus = 0, nodes = 0, domains = 0, rails = 0, scalable_units = 0;
  int min_per_domain = 0, max_per_domain = 0;
  bool crosses_spine = false;
};

// The fields of Topology::Span for GPUs added in increasing order, counted
// the same way.
class SpanCounter {
 public:
  explicit SpanCounter(const Shape& shape)
      : shape_(shape), rail_words_((static_cast<size_t>(shape.rails) + 63) / 64) {}

  void Reset() {
    counts_ = SpanCounts{};
    counts_.min_per_domain = INT32_MAX;
    node_start_ = node_end_ = 0;
    domain_ = su_ = -1;
    in_domain_ = 0;
    if (rail_words_.size() == 1) {
      rail_words_[0] = 0;
    } else {
      std::fill(rail_words_.begin(), rail_words_.end(), 0);
    }
  }

  // One GPU, above every GPU added so far.
  void Add(int gpu) {
    if (counts_.gpus == 0) first_ = gpu;
    last_ = gpu;
    ++counts_.gpus;
    if (gpu >= node_end_) EnterNode(gpu);
    ++in_domain_;
    const int local = gpu - node_start_;
    MarkRail(local < shape_.rails ? local : local % shape_.rails);
  }

  // GPUs gpu .. gpu + count - 1, above every GPU added so far: one step per
  // node they touch.
  void AddRun(int gpu, int count) {
    if (counts_.gpus == 0) first_ = gpu;
    last_ = gpu + count - 1;
    counts_.gpus += count;
    while (count > 0) {
      if (gpu >= node_end_) EnterNode(gpu);
      const int chunk = std::min(count, node_end_ - gpu);
      in_domain_ += chunk;
      MarkRails(gpu - node_start_, chunk);
      gpu += chunk;
      count -= chunk;
    }
  }

  SpanCounts Counts() const {
    SpanCounts c = counts_;
    if (in_domain_ > 0) {  // the domain still open
      c.min_per_domain = std::min(c.min_per_domain, in_domain_);
      c.max_per_domain = std::max(c.max_per_domain, in_domain_);
    }
    c.crosses_spine = shape_.domain_of(first_) != shape_.domain_of(last_) &&
                      shape_.su_of(first_) != shape_.su_of(last_);
    return c;
  }

  int first() const { return first_; }
  int last() const { return last_; }

 private:
  void EnterNode(int gpu) {
    const int node = shape_.node_of(gpu);
    node_start_ = node * shape_.gpus_per_node;
    node_end_ = node_start_ + shape_.gpus_per_node;
    ++counts_.nodes;
    const int su = shape_.su_of_node(node);
    counts_.scalable_units += su != su_;  // SUs never decrease along the walk
    su_ = su;
    const int domain = shape_.domain_of_node(node);
    if (domain != domain_) {
      if (in_domain_ > 0) {
        counts_.min_per_domain = std::min(counts_.min_per_domain, in_domain_);
        counts_.max_per_domain = std::max(counts_.max_per_domain, in_domain_);
      }
      in_domain_ = 0;
      ++counts_.domains;
      domain_ = domain;
    }
  }

  // Rails of `count` consecutive local GPUs from `local`.
  void MarkRails(int local, int count) {
    const int rails = shape_.rails;
    if (count >= rails) {  // every rail
      for (size_t w = 0; w < rail_words_.size(); ++w) {
        const int bits = std::min(64, rails - static_cast<int>(w) * 64);
        rail_words_[w] = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
      }
      counts_.rails = rails;
      return;
    }
    for (int i = 0; i < count; ++i) MarkRail((local + i) % rails);
  }

  void MarkRail(int rail) {
    uint64_t& word = rail_words_[static_cast<size_t>(rail) >> 6];
    const uint64_t bit = uint64_t{1} << (rail & 63);
    counts_.rails += (word & bit) == 0;
    word |= bit;
  }

  const Shape& shape_;
  SpanCounts counts_;
  int node_start_ = 0, node_end_ = 0, domain_ = -1, su_ = -1, in_domain_ = 0;
  int first_ = 0, last_ = 0;
  std::vector<uint64_t> rail_words_;
};

// ---------------------------------------------------------------------------
// Groups as mixed-radix offsets.

struct Digit {
  i64 stride = 0, size = 1;
  bool operator==(const Digit&) const = default;
};

// A few digits (an order has five axes), without allocating.
struct Digits {
  std::array<Digit, 5> items{};
  int count = 0;
  void push_back(Digit d) { items[static_cast<size_t>(count++)] = d; }
  const Digit* begin() const { return items.data(); }
  const Digit* end() const { return items.data() + count; }
  bool empty() const { return count == 0; }
  bool operator==(const Digits& o) const { return std::equal(begin(), end(), o.begin(), o.end()); }
};

// Offsets of a mixed-radix counter over digits [first, last), first digit
// fastest, into `out`; ascending, because Megatron's axes nest (each stride
// is at least the previous extent + 1).
void Offsets(const Digit* first, const Digit* last, std::vector<int>& out) {
  out.assign(1, 0);
  for (const Digit* d = first; d != last; ++d) {
    const size_t n = out.size();
    for (i64 c = 1; c < d->size; ++c)
      for (size_t i = 0; i < n; ++i) out.push_back(out[i] + static_cast<int>(c * d->stride));
  }
}

// Buffers reused from kind to kind and call to call (PlaceGroups runs ~10^5
// times per search; allocation would otherwise cost as much as the work).
struct Workspace {
  std::vector<int> a, run_starts, b, residues, next, classes;
  std::vector<char> seen;  // all zero between uses
};

// The offsets O of a group, split as O = A + B with every B offset a
// multiple of the period M (so each B-translate of A is A moved by whole
// periods). A digit that straddles M is cut where its multiples first hit
// M: digit (s, n) = (s, q) + (s q, n / q), q = M / gcd(s, M), when q | n.
struct GroupOffsets {
  const std::vector<int>* a = nullptr;  // A, ascending
  // A as runs of consecutive ranks: A = {s + i : s in run_starts, i < run}.
  int run = 1;
  const std::vector<int>* run_starts = nullptr;
  int a_gcd = 0;    // gcd of A's offsets = gcd of its digits' strides (0 for A = {0})
  Digits b_digits;  // B as digits (it can be large; rarely listed)
  int b_count = 1;  // |B|
  int b_gap = 0;    // smallest nonzero B offset (its first stride)
  int b_last = 0;   // largest B offset
};

GroupOffsets SplitOffsets(const Digits& digits, i64 period, Workspace& ws) {
  Digits a;
  GroupOffsets out;
  Digits& b = out.b_digits;
  for (const Digit& d : digits) {
    if (!b.empty() || d.stride % period == 0) {
      b.push_back(d);  // nested digits after a multiple of M are multiples of M
      continue;
    }
    const i64 q = period / std::gcd(d.stride, period);
    if (q < d.size && d.size % q == 0) {
      a.push_back({d.stride, q});
      b.push_back({d.stride * q, d.size / q});
    } else {
      a.push_back(d);
    }
  }
  Offsets(a.begin(), a.end(), ws.a);
  out.a = &ws.a;
  for (const Digit& d : a) out.a_gcd = std::gcd(out.a_gcd, static_cast<int>(d.stride));
  // Leading digits that continue each other (stride = the extent so far)
  // make runs of consecutive ranks.
  const Digit* rest = a.begin();
  while (rest != a.end() && rest->stride == out.run) out.run *= static_cast<int>((rest++)->size);
  Offsets(rest, a.end(), ws.run_starts);
  out.run_starts = &ws.run_starts;
  for (const Digit& d : b) {
    out.b_count *= static_cast<int>(d.size);
    out.b_last += static_cast<int>((d.size - 1) * d.stride);
  }
  if (!b.empty()) out.b_gap = static_cast<int>(b.begin()->stride);
  return out;
}

// Distinct residues modulo M of the bases sum c_u s_u over the unmasked
// digits, in the order Megatron lists the groups (first axis fastest), each
// at its first occurrence: ties between equally slow groups then go to the
// group the rank map lists first. Into ws.residues.
void BaseResidues(const Digits& digits, i64 modulus, Workspace& ws) {
  std::vector<int>& residues = ws.residues;
  std::vector<char>& seen = ws.seen;
  residues.assign(1, 0);
  if (seen.size() < static_cast<size_t>(modulus)) seen.assign(static_cast<size_t>(modulus), 0);
  const int m = static_cast<int>(modulus);
  for (const Digit& d : digits) {
    const int step = static_cast<int>(d.stride % modulus);
    if (step == 0) continue;
    const i64 cycle = modulus / std::gcd<i64>(step, modulus);  // c x step repeats after this
    const i64 count = std::min(d.size, cycle);
    for (int r : residues) seen[static_cast<size_t>(r)] = 1;
    ws.next = residues;
    int shift = 0;  // c x step mod M, kept below M without dividing
    for (i64 c = 1; c < count; ++c) {
      shift += step;
      if (shift >= m) shift -= m;
      for (int r : residues) {
        int v = r + shift;
        if (v >= m) v -= m;
        if (!seen[static_cast<size_t>(v)]) {
          seen[static_cast<size_t>(v)] = 1;
          ws.next.push_back(v);
        }
      }
    }
    for (int r : ws.next) seen[static_cast<size_t>(r)] = 0;
    residues.swap(ws.next);
  }
}

// The groups of one kind: A + B offsets, evaluated per base.
class KindEvaluator {
 public:
  KindEvaluator(const Shape& shape, const Placer& placer, const GroupOffsets& offsets)
      : shape_(shape), placer_(placer), offsets_(offsets), counter_(shape) {
    b_gap_gpus_ = placer_.gpu_shift(offsets_.b_gap);
    b_last_gpus_ = placer_.gpu_shift(offsets_.b_last);
    grain_ = std::gcd(std::gcd(shape.gpus_per_node, placer.ranks_per_domain), offsets_.a_gcd);
  }

  // The span of the group with base `base` (tiers empty). `base` is a
  // residue below the period, so base + A lies below B's smallest offset
  // (the axes faster than B's first digit, masked or not, nest below its
  // stride), and B's offsets are multiples of the period: the translates of
  // base + A fill disjoint windows of whole periods, hence of whole domains,
  // nodes and SUs. Their counts add up; only the first and last member and
  // the SU count need the shift.
  SpanCounts SpanOf(int base) {
    counter_.Reset();
    if (offsets_.run == 1) {
      for (int a : *offsets_.a) counter_.Add(placer_.gpu_of(base + a));
    } else {
      for (int start : *offsets_.run_starts) AddRankRun(base + start, offsets_.run);
    }
    SpanCounts span = counter_.Counts();
    if (offsets_.b_count == 1) return span;
    assert(shape_.domain_of(counter_.last()) - shape_.domain_of(counter_.first()) <
           b_gap_gpus_ / shape_.domain_gpus);
    const int copies = offsets_.b_count;
    span.gpus *= copies;
    span.nodes *= copies;
    span.domains *= copies;
    // Without SU boundaries everything is in SU 0 (the period then ignores SUs).
    if (!shape_.single_su()) span.scalable_units *= copies;
    const int first = counter_.first();
    const int last = counter_.last() + b_last_gpus_;
    span.crosses_spine = shape_.domain_of(first) != shape_.domain_of(last) &&
                         shape_.su_of(first) != shape_.su_of(last);
    return span;
  }

  // The GPU pairs Topology::Span picks to represent the group's tiers: the
  // first consecutive members in one domain, and the first consecutive
  // members in different domains of one SU ({-1, -1} when none). Walks one
  // translate of A only: the others are copies moved by whole periods (same
  // relations inside), so the only other candidates are the steps from one
  // translate to the next, which differ only by their B offsets.
  struct Pairs {
    std::pair<int, int> nvlink{-1, -1}, network{-1, -1};
  };
  Pairs PairsOf(int base, Workspace& ws) const {
    Pairs pairs;
    int prev = -1;
    for (int a : *offsets_.a) {
      const int gpu = placer_.gpu_of(base + a);
      if (prev >= 0) {
        const bool same_domain = shape_.domain_of(prev) == shape_.domain_of(gpu);
        if (same_domain && pairs.nvlink.first < 0) pairs.nvlink = {prev, gpu};
        if (!same_domain && pairs.network.first < 0 && shape_.su_of(prev) == shape_.su_of(gpu))
          pairs.network = {prev, gpu};
      }
      prev = gpu;
    }
    if (pairs.network.first >= 0 || offsets_.b_count == 1) return pairs;
    // A step from translate j to j + 1 stays in one SU only when the B offsets
    // move by exactly the SUs one translate spans (none when it spans one,
    // unless the cluster has a single SU).
    const int first = placer_.gpu_of(base);
    if (!shape_.single_su() && shape_.su_of(prev) == shape_.su_of(first)) return pairs;
    Offsets(offsets_.b_digits.begin(), offsets_.b_digits.end(), ws.b);
    for (size_t j = 0; j + 1 < ws.b.size(); ++j) {
      const int from = prev + placer_.gpu_shift(ws.b[j]);
      const int to = first + placer_.gpu_shift(ws.b[j + 1]);
      if (shape_.su_of(from) == shape_.su_of(to)) {
        pairs.network = {from, to};
        break;
      }
    }
    return pairs;
  }

  int size() const { return static_cast<int>(offsets_.a->size()) * offsets_.b_count; }
  int a_size() const { return static_cast<int>(offsets_.a->size()); }
  // Bases b and b + t with t < grain, b a multiple of the grain, give equal
  // spans: grain = gcd(GPUs per node, ranks per domain, every A offset), so
  // b + a is a multiple of the grain and adding t < grain to it crosses no
  // node (nor packed domain-block) boundary; every member moves t GPUs along
  // inside its node, which keeps the node, domain and SU of each and maps
  // the rails one to one.
  int grain() const { return grain_; }
  int first_gpu(int base) const { return placer_.gpu_of(base); }
  int last_gpu(int base) const { return placer_.gpu_of(base + offsets_.a->back() + offsets_.b_last); }

 private:
  // Consecutive ranks are consecutive GPUs except across a packed domain's
  // block of ranks.
  void AddRankRun(int rank, int count) {
    const int block = placer_.ranks_per_domain;
    while (count > 0) {
      const int chunk = std::min(count, block - rank % block);
      counter_.AddRun(placer_.gpu_of(rank), chunk);
      rank += chunk;
      count -= chunk;
    }
  }

  const Shape& shape_;
  const Placer& placer_;
  const GroupOffsets& offsets_;
  SpanCounter counter_;
  int b_gap_gpus_ = 0;   // GPU shift between consecutive B translates (the smallest)
  int b_last_gpus_ = 0;  // GPU shift of the last translate
  int grain_ = 1;
};

// ---------------------------------------------------------------------------
// Tiers.

// Adds the tiers Topology::Span would report for the whole group, from the
// same representative pairs it picks: the first consecutive members in one
// domain (NVLink); the first consecutive members in different domains of one
// SU, else the first and last (network); the first and last (spine).
void AddTiers(const Topology& topo, const KindEvaluator& eval, int base, Workspace& ws, GroupSpan& span) {
  KindEvaluator::Pairs pairs = eval.PairsOf(base, ws);
  const int first = eval.first_gpu(base), last = eval.last_gpu(base);
  span.tiers.reserve(3);
  if (span.max_per_domain >= 2)
    span.tiers.push_back(topo.TierBetween(pairs.nvlink.first, pairs.nvlink.second, LinkTier::kNvlink));
  if (span.domains >= 2) {
    if (pairs.network.first < 0) pairs.network = {first, last};
    span.tiers.push_back(topo.TierBetween(pairs.network.first, pairs.network.second, LinkTier::kNetwork));
  }
  if (span.crosses_spine) span.tiers.push_back(topo.TierBetween(first, last, LinkTier::kSpine));
}

// ---------------------------------------------------------------------------
// Kinds.

enum Axis { kAxisTp, kAxisCp, kAxisEp, kAxisDp, kAxisPp, kAxisCount };

Axis AxisOf(std::string_view name) {
  if (name == "tp") return kAxisTp;
  if (name == "cp") return kAxisCp;
  if (name == "ep") return kAxisEp;
  if (name == "dp") return kAxisDp;
  return kAxisPp;
}

// One generator's axes in its order, fastest first.
struct AxisInfo {
  Axis axis;
  i64 stride, size;
};

// The axes of the dense and the expert generator (MakeFoldedGenerators) as
// RankGenerator::Create normalises them: the order's axes, then the missing
// ones (size 1) in Megatron's tp, pp, dp, ep, cp order; strides fastest
// first. Integer work only: PlaceGroups runs once per degree key of a
// search. False wherever Create might refuse or rewrite the order (a
// problem in it, upper case, a missing axis of size > 1, a size below 1, an
// overflowing world): the caller then builds the generators, for their
// message. Axis indices are kOrderAxisNames' (tp, cp, ep, dp, pp), as Axis.
struct FoldedAxes {
  std::array<AxisInfo, kAxisCount> dense{}, expert{};
};
bool FastFoldedAxes(const Layout& l, FoldedAxes& out) {
  for (char c : l.order) {
    if (c >= 'A' && c <= 'Z') return false;
  }
  const OrderString parsed = ParseOrderString(l.order);
  if (!parsed.ok()) return false;
  static_assert(kAxisTp == 0 && kAxisCp == 1 && kAxisEp == 2 && kAxisDp == 3 && kAxisPp == 4,
                "Axis follows kOrderAxisNames");
  std::array<int, kAxisCount> axes{};
  int count = 0;
  for (int i = 0; i < parsed.count; ++i) axes[static_cast<size_t>(count++)] = parsed.axes[static_cast<size_t>(i)];
  constexpr std::array<Axis, kAxisCount> kMegatronOrder = {kAxisTp, kAxisPp, kAxisDp, kAxisEp, kAxisCp};
  //                                          tp     cp    ep    dp     pp
  const std::array<i64, kAxisCount> dense = {l.tp, l.cp, 1, l.dp, l.pp};
  const std::array<i64, kAxisCount> expert = {l.etp, 1, l.ep, l.edp, l.pp};
  for (Axis a : kMegatronOrder) {
    if (parsed.Has(a)) continue;
    if (dense[a] != 1 || expert[a] != 1) return false;
    axes[static_cast<size_t>(count++)] = a;
  }
  auto fill = [&](const std::array<i64, kAxisCount>& sizes, std::array<AxisInfo, kAxisCount>& info) {
    i64 stride = 1;
    for (size_t i = 0; i < info.size(); ++i) {
      const Axis a = static_cast<Axis>(axes[i]);
      if (sizes[a] < 1) return false;
      info[i] = {a, stride, sizes[a]};
      stride *= sizes[a];
      if (stride > INT32_MAX) return false;
    }
    return true;
  };
  return fill(dense, out.dense) && fill(expert, out.expert);
}

i64 StrideOf(const std::array<AxisInfo, kAxisCount>& axes, Axis axis) {
  for (const AxisInfo& a : axes) {
    if (a.axis == axis) return a.stride;
  }
  return 0;
}

std::array<AxisInfo, kAxisCount> AxesOf(const RankGenerator& gen) {
  std::array<AxisInfo, kAxisCount> axes{};
  const std::vector<std::string>& names = gen.axes();
  const std::vector<int>& sizes = gen.sizes();
  i64 stride = 1;
  for (size_t i = 0; i < names.size() && i < axes.size(); ++i) {
    axes[i] = {AxisOf(names[i]), stride, sizes[i]};
    stride *= sizes[i];
  }
  return axes;
}

struct KindSource {
  GroupKind kind;
  bool expert;                  // the expert generator (etp, ep, edp) or the dense one
  std::array<bool, kAxisCount> masked;  // the axes the kind's groups vary over
};
constexpr bool T = true, F = false;
//                                               tp cp ep dp pp
constexpr KindSource kKindSources[] = {
    {GroupKind::kTp, false, {T, F, F, F, F}},   {GroupKind::kCp, false, {F, T, F, F, F}},
    {GroupKind::kTpCp, false, {T, T, F, F, F}}, {GroupKind::kDp, false, {F, F, F, T, F}},
    {GroupKind::kDpCp, false, {F, T, F, T, F}}, {GroupKind::kPp, false, {F, F, F, F, T}},
    {GroupKind::kEp, true, {F, F, T, F, F}},    {GroupKind::kEtp, true, {T, F, F, F, F}},
    {GroupKind::kTpEp, true, {T, F, T, F, F}},  {GroupKind::kEdp, true, {F, F, F, T, F}},
};

// A kind's axes as digits: those its groups vary over (masked) and the
// others (which number the groups). Kinds with equal digits have equal
// groups (tp and etp when TP = ETP, for instance).
struct KindDigits {
  Digits masked, unmasked;
  bool operator==(const KindDigits&) const = default;
};

KindDigits DigitsOf(const KindSource& source, const std::array<AxisInfo, kAxisCount>& axes) {
  KindDigits d;
  for (const AxisInfo& axis : axes) {
    if (axis.size < 2) continue;
    (source.masked[axis.axis] ? d.masked : d.unmasked).push_back({axis.stride, axis.size});
  }
  return d;
}

GroupPlacement PlaceKind(const KindDigits& digits, const Shape& shape, const Placer& placer, i64 period,
                         int world, const Topology& topo, Workspace& ws) {
  const GroupOffsets offsets = SplitOffsets(digits.masked, period, ws);
  KindEvaluator eval(shape, placer, offsets);

  // With one offset in A, every class gives the same span (|B| members one
  // period apart: one per domain, node and, with SUs, SU; one rail), so one
  // class is enough.
  if (eval.a_size() == 1) {
    ws.residues.assign(1, 0);
  } else {
    BaseResidues(digits.unmasked, period, ws);
  }
  // Bases that agree but for the last bits below the grain give equal spans
  // (KindEvaluator::grain): evaluate the first of each, the one the rank
  // map lists first. ws.seen is all zero again afterwards.
  const int grain = eval.grain();
  ws.classes.clear();
  int worst_base = ws.residues.front();
  SpanCounts worst = eval.SpanOf(worst_base);
  auto first_of_class = [&](int base) {
    const int cls = base / grain;
    if (ws.seen[static_cast<size_t>(cls)]) return false;
    ws.seen[static_cast<size_t>(cls)] = 1;
    ws.classes.push_back(cls);
    return true;
  };
  if (grain > 1 && ws.residues.size() > 1) first_of_class(worst_base);
  for (size_t i = 1; i < ws.residues.size(); ++i) {
    const int base = ws.residues[i];
    if (grain > 1 && !first_of_class(base)) continue;
    const SpanCounts span = eval.SpanOf(base);
    if (SlownessKey(span) > SlownessKey(worst)) {
      worst = span;
      worst_base = base;
    }
  }
  for (int cls : ws.classes) ws.seen[static_cast<size_t>(cls)] = 0;

  GroupPlacement out;
  out.size = eval.size();
  out.groups = world / out.size;
  GroupSpan& span = out.span;
  span.gpus = worst.gpus;
  span.nodes = worst.nodes;
  span.domains = worst.domains;
  span.rails = worst.rails;
  span.scalable_units = worst.scalable_units;
  span.min_per_domain = worst.min_per_domain;
  span.max_per_domain = worst.max_per_domain;
  span.inside_one_domain = worst.domains == 1;
  span.crosses_spine = worst.crosses_spine;
  AddTiers(topo, eval, worst_base, ws, span);
  if (span.domains >= 2) {
    // Ranks a node runs (packed leaves the tail of each domain idle) over the
    // worst group's ranks per node.
    const i64 used = std::min<i64>({shape.gpus_per_node, placer.ranks_per_domain, world});
    const i64 per_node = (span.gpus + span.nodes - 1) / span.nodes;
    out.groups_sharing_links = static_cast<int>(std::max<i64>(1, (used + per_node - 1) / per_node));
  }
  return out;
}

// ---------------------------------------------------------------------------
// Checks, as BuildRankMap makes them.

Status CheckDegrees(const Layout& l, const ClusterSpec& cluster) {
  if (Status s = CheckLayoutDegrees(l); !s.ok()) return s;
  if (l.world > cluster.total_gpus())
    return Status::Error("layout: world " + Str(l.world) + " ranks > " + Str(cluster.total_gpus()) +
                         " GPUs in cluster " + cluster.name);
  return Status();
}

// PlaceRanks' rule and check: packed keeps whole heavy blocks inside
// domains when a block fits in one; otherwise (and for linear) rank r is on
// GPU r.
Result<Placer> MakePlacer(const Layout& l, const ClusterSpec& cluster) {
  const int block = l.placement == Placement::kPacked ? HeavyBlock(l) : 0;
  const PackedBlocks blocks = PackBlocks(l.world, block, cluster.nvlink_domain_gpus);
  if (Status fits = CheckPackedFits(blocks, block, l.world, cluster); !fits.ok()) return fits;
  return blocks;
}

// The rank period P (header): a multiple of ranks_per_domain whose GPU image
// is a multiple of the domain, node and (when there are several) SU sizes.
// Capped at the world size: with P >= world no two bases alias anyway.
i64 RankPeriod(const Shape& shape, const Placer& placer, int world) {
  i64 gpu_period = shape.domain_gpus;
  if (!shape.single_su()) gpu_period = std::lcm(gpu_period, shape.su_gpus());
  const i64 period = gpu_period / shape.domain_gpus * placer.ranks_per_domain;
  return std::min<i64>(period, world);
}


// A generator's axes of size > 1 as PlaceKind's cache key reads them: the
// stride and size of each (for the kinds that vary over it), and the stride
// mod P with the multiples of it that stay distinct mod P (as BaseResidues
// reads the others; step 0: P absorbs it). Once per generator, not per kind.
struct KeyAxis {
  Axis axis;
  i64 stride, size, step, distinct;
};
struct KeyAxes {
  std::array<KeyAxis, kAxisCount> items{};
  int count = 0;
};
KeyAxes KeyAxesOf(const std::array<AxisInfo, kAxisCount>& axes, i64 period) {
  KeyAxes out;
  for (const AxisInfo& axis : axes) {
    if (axis.size < 2) continue;  // as DigitsOf
    const i64 step = axis.stride % period;
    const i64 distinct = step == 0 ? 0 : std::min<i64>(axis.size, period / std::gcd<i64>(step, period));
    out.items[static_cast<size_t>(out.count++)] = {axis.axis, axis.stride, axis.size, step, distinct};
  }
  return out;
}

// PlaceKind's cache key (GroupPlacementCache::Key) for `source`'s digits
// (DigitsOf) on `axes`: P, the placement's ranks per domain and domain, the
// ranks a node runs, the masked digits, and the unmasked ones as
// BaseResidues reads them. Every figure is at most the world (an int).
// False when the digits do not fit the key (no kind of a Megatron layout
// has more than four): the kind is then placed without the cache.
bool KindKeyOf(const KindSource& source, const KeyAxes& axes, i64 period, const Placer& placer, i64 used,
               GroupPlacementCache::Key& key) {
  constexpr int kHeader = 5;
  int masked = 0, unmasked = 0;
  for (int i = 0; i < axes.count; ++i) {
    const KeyAxis& a = axes.items[static_cast<size_t>(i)];
    if (source.masked[a.axis]) {
      ++masked;
    } else if (a.step != 0) {
      ++unmasked;
    }
  }
  if (kHeader + 2 * (masked + unmasked) > static_cast<int>(key.size())) return false;
  key = {};
  key[0] = static_cast<int32_t>(period);
  key[1] = placer.ranks_per_domain;
  key[2] = placer.domain_gpus;
  key[3] = static_cast<int32_t>(used);
  key[4] = masked;
  size_t m = kHeader, u = kHeader + 2 * static_cast<size_t>(masked);
  for (int i = 0; i < axes.count; ++i) {
    const KeyAxis& a = axes.items[static_cast<size_t>(i)];
    if (source.masked[a.axis]) {
      key[m++] = static_cast<int32_t>(a.stride);
      key[m++] = static_cast<int32_t>(a.size);
    } else if (a.step != 0) {
      key[u++] = static_cast<int32_t>(a.step);
      key[u++] = static_cast<int32_t>(a.distinct);
    }
  }
  return true;
}

// A multiply per two words of the key; the high half, which every bit of
// the key reaches, folded into the low one (whose bits pick the slot).
uint64_t HashOf(const GroupPlacementCache::Key& key) {
  static_assert(sizeof(GroupPlacementCache::Key) % sizeof(uint64_t) == 0);
  uint64_t h = 0;
  for (size_t i = 0; i < sizeof(key); i += sizeof(uint64_t)) {
    uint64_t word;
    std::memcpy(&word, reinterpret_cast<const char*>(key.data()) + i, sizeof word);
    h = (h ^ word) * 0x9e3779b97f4a7c15ull;
  }
  return h ^ (h >> 32);
}

}  // namespace

void GroupPlacementCache::Clear() {
  entries_.clear();
  for (Slot& slot : slots_) slot.entry = 0;
}

GroupPlacementCache::Slot& GroupPlacementCache::SlotOf(const Key& key) {
  const size_t mask = slots_.size() - 1;
  for (size_t i = HashOf(key) & mask;; i = (i + 1) & mask) {
    Slot& slot = slots_[i];
    if (slot.entry == 0 || slot.key == key) return slot;
  }
}

void GroupPlacementCache::Grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(std::max<size_t>(16, old.size() * 2), Slot{});
  for (const Slot& slot : old) {
    if (slot.entry != 0) SlotOf(slot.key) = slot;
  }
}

const GroupPlacement* GroupPlacementCache::Find(const Key& key) {
  const Slot* slot = slots_.empty() ? nullptr : &SlotOf(key);
  if (!slot || slot->entry == 0) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  return &entries_[slot->entry - 1];
}

void GroupPlacementCache::Put(const Key& key, const GroupPlacement& placement) {
  if (entries_.size() >= max_entries_) Clear();
  if (2 * (entries_.size() + 1) > slots_.size()) Grow();  // at most half the slots in use
  Slot& slot = SlotOf(key);
  if (slot.entry != 0) return;  // stored already (the same placement)
  entries_.push_back(placement);
  slot.key = key;
  slot.entry = static_cast<uint32_t>(entries_.size());
}

Result<LayoutPlacement> PlaceGroups(const Layout& layout, const Topology& topology) {
  return PlaceGroups(layout, topology, nullptr);
}

Result<LayoutPlacement> PlaceGroups(const Layout& layout, const Topology& topology, GroupPlacementCache* cache) {
  LayoutPlacement out;
  if (Status s = PlaceGroups(layout, topology, cache, &out); !s.ok()) return s;
  return out;
}

Status PlaceGroups(const Layout& layout, const Topology& topology, GroupPlacementCache* cache, LayoutPlacement* out) {
  const ClusterSpec& cluster = topology.cluster();
  if (Status s = CheckDegrees(layout, cluster); !s.ok()) return s;
  FoldedAxes axes;
  if (!FastFoldedAxes(layout, axes)) {
    Result<FoldedGenerators> gens = MakeFoldedGenerators(layout);
    if (!gens.ok()) return gens.status();
    axes.dense = AxesOf(gens->dense);
    axes.expert = AxesOf(gens->expert);
  }
  const i64 dense_pp = StrideOf(axes.dense, kAxisPp), expert_pp = StrideOf(axes.expert, kAxisPp);
  if (layout.pp > 1 && dense_pp != expert_pp)
    return Status::Error("order '" + layout.order + "' gives different pipeline groups in the dense view (pp stride " +
                         Str(dense_pp) + ") and the expert view (pp stride " + Str(expert_pp) + ")");
  Result<Placer> placer = MakePlacer(layout, cluster);
  if (!placer.ok()) return placer.status();

  const Shape shape = ClusterShape::Of(cluster);
  const i64 period = RankPeriod(shape, *placer, layout.world);
  const std::array<AxisInfo, kAxisCount>& dense = axes.dense;
  const std::array<AxisInfo, kAxisCount>& expert = axes.expert;
  const i64 used = std::min<i64>({shape.gpus_per_node, placer->ranks_per_domain, layout.world});
  thread_local Workspace ws;
  auto place = [&](const KindDigits& digits) {
    return PlaceKind(digits, shape, *placer, period, layout.world, topology, ws);
  };
  if (!cache) {
    // Kinds whose digits equal an earlier kind's take its placement (tp and
    // etp when TP = ETP, for instance).
    std::array<KindDigits, std::size(kKindSources)> digits;
    for (size_t k = 0; k < std::size(kKindSources); ++k) {
      const KindSource& source = kKindSources[k];
      GroupPlacement& placement = out->by_kind[static_cast<int>(source.kind)];
      digits[k] = DigitsOf(source, source.expert ? expert : dense);
      size_t same = 0;
      while (same < k && !(digits[same] == digits[k])) ++same;
      placement = same < k ? out->by_kind[static_cast<int>(kKindSources[same].kind)] : place(digits[k]);
      placement.kind = source.kind;
    }
    return Status();
  }
  // With the cache such kinds meet the earlier one's entry.
  const KeyAxes dense_keys = KeyAxesOf(dense, period), expert_keys = KeyAxesOf(expert, period);
  for (const KindSource& source : kKindSources) {
    GroupPlacement& placement = out->by_kind[static_cast<int>(source.kind)];
    const std::array<AxisInfo, kAxisCount>& generator = source.expert ? expert : dense;
    GroupPlacementCache::Key key;
    if (!KindKeyOf(source, source.expert ? expert_keys : dense_keys, period, *placer, used, key)) {
      placement = place(DigitsOf(source, generator));
    } else if (const GroupPlacement* hit = cache->Find(key)) {
      placement = *hit;
      placement.groups = layout.world / placement.size;  // the one field that depends on the world
    } else {
      placement = place(DigitsOf(source, generator));
      cache->Put(key, placement);
    }
    placement.kind = source.kind;
  }
  return Status();
}

}  // namespace foldplan
