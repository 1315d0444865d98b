// A port of Megatron-Core's rank numbering (megatron/core/parallel_state.py):
// RankGenerator and generate_masked_orthogonal_rank_groups, with the same
// group and rank order, so that a group list printed here is byte-identical
// to Megatron's (doc/folding.md section 3). Errors are Status values: an order
// string Megatron would raise on is reported, never thrown.
//
// Order string: axes fastest-varying first, e.g. "tp-cp-ep-dp-pp". Axes of
// size 1 missing from the string are appended at the end (in Megatron's
// tp, pp, dp, ep, cp order); a missing axis of size > 1, an unknown token, a
// repeated token and an empty token are errors.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "planner/layout.h"
#include "planner/rank_map.h"

namespace foldplan {

// Megatron's generate_masked_orthogonal_rank_groups. `sizes` lists the axis
// sizes fastest first; mask[i] is true for the axes that vary inside a group.
// Groups are listed with the unmasked axes as a mixed-radix counter (first
// unmasked axis fastest); ranks inside a group with the masked axes as a
// mixed-radix counter (first masked axis fastest). O(world).
Groups GenerateMaskedOrthogonalRankGroups(const std::vector<int>& sizes, const std::vector<bool>& mask);

class RankGenerator {
 public:
  // Megatron's RankGenerator(tp, ep, dp, pp, cp, order). Every size must be
  // >= 1, ep == 1 or cp == 1 (Megatron's assert), and the order valid.
  static Result<RankGenerator> Create(int tp, int ep, int dp, int pp, int cp, std::string_view order);

  int world_size() const { return world_size_; }
  // The normalised order: lower case, missing size-1 axes appended.
  const std::string& order() const { return order_; }
  // Axis tokens and sizes in normalised order (fastest first). Always holds
  // all five axes tp, cp, ep, dp, pp.
  const std::vector<std::string>& axes() const { return axes_; }
  const std::vector<int>& sizes() const { return sizes_; }

  // Size, stride and coordinate along one of "tp", "cp", "ep", "dp", "pp"
  // (any other name is a bug: it asserts).
  int Size(std::string_view axis) const;
  int Stride(std::string_view axis) const;
  int Coordinate(int rank, std::string_view axis) const { return rank / Stride(axis) % Size(axis); }

  // Megatron's get_ranks(token): the groups of ranks that differ only in the
  // axes named by `token` ("dp-cp", "tp-ep-pp", ...; token order does not
  // matter). Unknown or repeated axes are errors.
  Result<Groups> GetRanks(std::string_view token) const;

 private:
  RankGenerator() = default;
  int AxisIndex(std::string_view axis) const;  // -1 when absent

  int world_size_ = 0;
  std::string order_;
  std::vector<std::string> axes_;
  std::vector<int> sizes_;
  std::vector<int> strides_;
};

// The two generators of a folded layout, sharing its order string:
// dense RankGenerator(tp=TP, ep=1, dp=DP, pp=PP, cp=CP) and
// expert RankGenerator(tp=ETP, ep=EP, dp=EDP, pp=PP, cp=1).
struct FoldedGenerators {
  RankGenerator dense;
  RankGenerator expert;
};
Result<FoldedGenerators> MakeFoldedGenerators(const Layout& layout);

using GroupSet = std::array<Groups, kGroupKindCount>;

// Every group kind of rank_map.h, as Megatron builds it, indexed by
// GroupKind. Fails when a generator refuses the order or when the dense and
// expert pp groups differ (Megatron's assert; the message names the order).
Result<GroupSet> BuildFoldedGroups(const Layout& layout);
Result<GroupSet> BuildFoldedGroups(const FoldedGenerators& generators, const Layout& layout);

}  // namespace foldplan
