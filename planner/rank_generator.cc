#include "planner/rank_generator.h"

#include <cassert>
#include <cctype>
#include <cstdint>
#include <limits>
#include <sstream>

#include "core/order_string.h"

namespace foldplan {
namespace {

// Megatron's name_to_size key order: missing size-1 axes are appended in it.
constexpr std::array<const char*, 5> kAxisNames = {"tp", "pp", "dp", "ep", "cp"};

std::string Join(const std::vector<std::string>& tokens) {
  std::string out;
  for (const std::string& t : tokens) out += (out.empty() ? "" : "-") + t;
  return out;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Offsets of every value of a mixed-radix counter over digits with the given
// sizes and strides, the first digit fastest: offsets[v] = sum d_k * stride_k.
std::vector<int> MixedRadixOffsets(const std::vector<int>& sizes, const std::vector<int>& strides) {
  std::vector<int> offsets = {0};
  for (size_t k = 0; k < sizes.size(); ++k) {
    // Digit k is slower than every digit already placed: it is the outer loop.
    std::vector<int> next;
    next.reserve(offsets.size() * static_cast<size_t>(sizes[k]));
    for (int digit = 0; digit < sizes[k]; ++digit)
      for (int offset : offsets) next.push_back(offset + digit * strides[k]);
    offsets = std::move(next);
  }
  return offsets;
}

}  // namespace

Groups GenerateMaskedOrthogonalRankGroups(const std::vector<int>& sizes, const std::vector<bool>& mask) {
  assert(sizes.size() == mask.size());
  std::vector<int> masked_sizes, masked_strides, unmasked_sizes, unmasked_strides;
  int stride = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    (mask[i] ? masked_sizes : unmasked_sizes).push_back(sizes[i]);
    (mask[i] ? masked_strides : unmasked_strides).push_back(stride);
    stride *= sizes[i];
  }
  // Megatron decomposes the group index over the unmasked shape and the
  // index inside a group over the masked shape; the offsets are the same sums.
  const std::vector<int> group_base = MixedRadixOffsets(unmasked_sizes, unmasked_strides);
  const std::vector<int> in_group = MixedRadixOffsets(masked_sizes, masked_strides);
  Groups groups(group_base.size());
  for (size_t g = 0; g < group_base.size(); ++g) {
    groups[g].reserve(in_group.size());
    for (int offset : in_group) groups[g].push_back(group_base[g] + offset);
  }
  return groups;
}

Result<RankGenerator> RankGenerator::Create(int tp, int ep, int dp, int pp, int cp, std::string_view order) {
  const std::array<int, 5> size_of = {tp, pp, dp, ep, cp};  // kAxisNames order
  int64_t world = 1;
  for (size_t i = 0; i < kAxisNames.size(); ++i) {
    if (size_of[i] < 1)
      return Status::Error(std::string("rank generator: ") + kAxisNames[i] + " size must be >= 1, found " +
                           std::to_string(size_of[i]));
    world *= size_of[i];
    if (world > std::numeric_limits<int>::max())
      return Status::Error("rank generator: world size tp*ep*dp*pp*cp overflows");
  }
  if (ep != 1 && cp != 1)
    return Status::Error("rank generator: ep " + std::to_string(ep) + " and cp " + std::to_string(cp) +
                         " are both > 1; Megatron's RankGenerator allows only one of them (CP lives in "
                         "the dense generator, EP in the expert generator)");

  const std::string given = Lower(order);
  const OrderString parsed = ParseOrderString(given);
  const std::string token(parsed.token);
  switch (parsed.problem) {
    case OrderString::Problem::kNone: break;
    case OrderString::Problem::kEmptyToken:
      return Status::Error("order '" + std::string(order) + "': empty axis name");
    case OrderString::Problem::kUnknownAxis:
      return Status::Error("order '" + std::string(order) + "': unknown axis '" + token +
                           "' (expected tp, cp, ep, dp, pp)");
    case OrderString::Problem::kRepeatedAxis:
      return Status::Error("order '" + std::string(order) + "': axis '" + token + "' repeated");
  }
  std::vector<std::string> tokens;
  for (int i = 0; i < parsed.count; ++i) {
    tokens.emplace_back(kOrderAxisNames[static_cast<size_t>(parsed.axes[static_cast<size_t>(i)])]);
  }
  for (size_t i = 0; i < kAxisNames.size(); ++i) {
    bool present = false;
    for (const std::string& t : tokens) present = present || t == kAxisNames[i];
    if (present) continue;
    if (size_of[i] != 1)
      return Status::Error("order '" + std::string(order) + "' does not name " + kAxisNames[i] +
                           ", whose size is " + std::to_string(size_of[i]) +
                           " (only axes of size 1 may be left out)");
    tokens.push_back(kAxisNames[i]);
  }

  RankGenerator gen;
  gen.world_size_ = static_cast<int>(world);
  gen.order_ = Join(tokens);
  gen.axes_ = tokens;
  int stride = 1;
  for (const std::string& token : tokens) {
    int size = 0;
    for (size_t i = 0; i < kAxisNames.size(); ++i)
      if (token == kAxisNames[i]) size = size_of[i];
    gen.sizes_.push_back(size);
    gen.strides_.push_back(stride);
    stride *= size;
  }
  return gen;
}

int RankGenerator::AxisIndex(std::string_view axis) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i] == axis) return static_cast<int>(i);
  return -1;
}

int RankGenerator::Size(std::string_view axis) const {
  int i = AxisIndex(axis);
  assert(i >= 0 && "not an axis name");
  return sizes_[i];
}

int RankGenerator::Stride(std::string_view axis) const {
  int i = AxisIndex(axis);
  assert(i >= 0 && "not an axis name");
  return strides_[i];
}

Result<Groups> RankGenerator::GetRanks(std::string_view token) const {
  const std::string given = Lower(token);
  const OrderString parsed = ParseOrderString(given);
  const std::string bad(parsed.token);
  if (parsed.problem == OrderString::Problem::kRepeatedAxis)
    return Status::Error("group token '" + std::string(token) + "': axis '" + bad + "' repeated");
  if (!parsed.ok())
    return Status::Error("group token '" + std::string(token) + "': unknown axis '" + bad + "'");
  std::vector<bool> mask(axes_.size(), false);
  for (int k = 0; k < parsed.count; ++k) {
    mask[AxisIndex(kOrderAxisNames[static_cast<size_t>(parsed.axes[static_cast<size_t>(k)])])] =
        true;
  }
  return GenerateMaskedOrthogonalRankGroups(sizes_, mask);
}

Result<FoldedGenerators> MakeFoldedGenerators(const Layout& layout) {
  Result<RankGenerator> dense =
      RankGenerator::Create(layout.tp, /*ep=*/1, layout.dp, layout.pp, layout.cp, layout.order);
  if (!dense.ok()) return Status::Error("dense view: " + dense.status().message());
  Result<RankGenerator> expert =
      RankGenerator::Create(layout.etp, layout.ep, layout.edp, layout.pp, /*cp=*/1, layout.order);
  if (!expert.ok()) return Status::Error("expert view: " + expert.status().message());
  return FoldedGenerators{std::move(dense).value(), std::move(expert).value()};
}

namespace {

// Which generator and token each GroupKind comes from (embedding kinds are
// derived from pp afterwards).
struct GroupSource {
  GroupKind kind;
  bool expert;
  const char* token;
};
constexpr std::array<GroupSource, 14> kGroupSources = {{
    {GroupKind::kTp, false, "tp"},
    {GroupKind::kCp, false, "cp"},
    {GroupKind::kDp, false, "dp"},
    {GroupKind::kDpCp, false, "dp-cp"},
    {GroupKind::kTpCp, false, "tp-cp"},
    {GroupKind::kTpDp, false, "tp-dp"},
    {GroupKind::kTpDpCp, false, "tp-dp-cp"},
    {GroupKind::kMp, false, "tp-pp"},
    {GroupKind::kPp, false, "pp"},
    {GroupKind::kEp, true, "ep"},
    {GroupKind::kEtp, true, "tp"},
    {GroupKind::kTpEp, true, "tp-ep"},
    {GroupKind::kTpEpPp, true, "tp-ep-pp"},
    {GroupKind::kEdp, true, "dp"},
}};

std::string DescribeFirstGroups(const Groups& groups) {
  std::ostringstream out;
  for (size_t g = 0; g < groups.size() && g < 3; ++g) {
    out << (g ? "," : "") << "[";
    for (size_t i = 0; i < groups[g].size(); ++i) out << (i ? "," : "") << groups[g][i];
    out << "]";
  }
  if (groups.size() > 3) out << ",...";
  return out.str();
}

}  // namespace

Result<GroupSet> BuildFoldedGroups(const FoldedGenerators& gens, const Layout& layout) {
  GroupSet set;
  for (const GroupSource& source : kGroupSources) {
    Result<Groups> groups = (source.expert ? gens.expert : gens.dense).GetRanks(source.token);
    if (!groups.ok()) return groups.status();  // a bug: the tokens above are all valid
    set[static_cast<int>(source.kind)] = std::move(groups).value();
  }

  // Megatron asserts that both views give the same pipeline groups: with an
  // order that does not end with pp, the pp stride is TP*CP in the dense
  // view but ETP*EP in the expert view.
  Result<Groups> expert_pp = gens.expert.GetRanks("pp");
  if (!expert_pp.ok()) return expert_pp.status();
  const Groups& dense_pp = set[static_cast<int>(GroupKind::kPp)];
  if (*expert_pp != dense_pp)
    return Status::Error("order '" + layout.order +
                         "' gives different pipeline groups in the dense view (pp stride " +
                         std::to_string(gens.dense.Stride("pp")) + ": " + DescribeFirstGroups(dense_pp) +
                         ") and the expert view (pp stride " + std::to_string(gens.expert.Stride("pp")) +
                         ": " + DescribeFirstGroups(*expert_pp) +
                         "); Megatron needs the order to end with pp, or pp == 1, "
                         "or edp == dp (here dp " +
                         std::to_string(layout.dp) + ", edp " + std::to_string(layout.edp) + ")");

  // Megatron's default embedding ranks: first and last stage of each
  // pipeline group (the group itself when it has one rank); position
  // embedding: the first stage only.
  Groups& embedding = set[static_cast<int>(GroupKind::kEmbedding)];
  Groups& position = set[static_cast<int>(GroupKind::kPositionEmbedding)];
  for (const std::vector<int>& pp_group : dense_pp) {
    if (pp_group.size() > 1)
      embedding.push_back({pp_group.front(), pp_group.back()});
    else
      embedding.push_back(pp_group);
    position.push_back({pp_group.front()});
  }
  return set;
}

Result<GroupSet> BuildFoldedGroups(const Layout& layout) {
  Result<FoldedGenerators> gens = MakeFoldedGenerators(layout);
  if (!gens.ok()) return gens.status();
  return BuildFoldedGroups(*gens, layout);
}

}  // namespace foldplan
