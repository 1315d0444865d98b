// Export dispatch, format names, and the rank-map invariants checked before
// every export.
#include "planner/rank_export.h"

#include <algorithm>
#include <array>
#include <string>

#include "planner/export_util.h"

namespace foldplan {

const char* Name(ExportFormat format) {
  switch (format) {
    case ExportFormat::kRankMap: return "rankmap";
    case ExportFormat::kMegatron: return "megatron";
    case ExportFormat::kTorch: return "torch";
    case ExportFormat::kTorchtitan: return "torchtitan";
    case ExportFormat::kOlmoCore: return "olmo-core";
    case ExportFormat::kJax: return "jax";
    case ExportFormat::kMaxText: return "maxtext";
    case ExportFormat::kTorchtitanToml: return "torchtitan-toml";
  }
  return "?";
}

Result<ExportFormat> ParseExportFormat(std::string_view text) {
  std::string names;
  for (int i = 0; i < kExportFormatCount; ++i) {
    const auto format = static_cast<ExportFormat>(i);
    if (text == Name(format)) return format;
    names += std::string(i ? ", " : "") + Name(format);
  }
  return Status::Error("unknown export format '" + std::string(text) + "' (expected one of " + names + ")");
}

namespace {

// Coordinates a group kind can vary over. Dense kinds live in the dense
// view [pp, dp, cp, tp], expert kinds in the expert view [pp, edp, ep, etp].
enum Axis { kPpAxis, kDpAxis, kCpAxis, kTpAxis, kEdpAxis, kEpAxis, kEtpAxis, kAxisCount };
constexpr std::array<const char*, kAxisCount> kAxisNames = {"pp", "dp", "cp", "tp", "edp", "ep", "etp"};

struct KindAxes {
  bool expert;
  std::array<bool, kAxisCount> varies;
};

KindAxes AxesOf(GroupKind kind) {
  auto dense = [](std::initializer_list<Axis> axes) {
    KindAxes k{false, {}};
    for (Axis a : axes) k.varies[a] = true;
    return k;
  };
  auto expert = [&](std::initializer_list<Axis> axes) {
    KindAxes k = dense(axes);
    k.expert = true;
    return k;
  };
  switch (kind) {
    case GroupKind::kTp: return dense({kTpAxis});
    case GroupKind::kCp: return dense({kCpAxis});
    case GroupKind::kDp: return dense({kDpAxis});
    case GroupKind::kDpCp: return dense({kDpAxis, kCpAxis});
    case GroupKind::kTpCp: return dense({kTpAxis, kCpAxis});
    case GroupKind::kTpDp: return dense({kTpAxis, kDpAxis});
    case GroupKind::kTpDpCp: return dense({kTpAxis, kDpAxis, kCpAxis});
    case GroupKind::kMp: return dense({kTpAxis, kPpAxis});
    case GroupKind::kPp: return dense({kPpAxis});
    case GroupKind::kEp: return expert({kEpAxis});
    case GroupKind::kEtp: return expert({kEtpAxis});
    case GroupKind::kTpEp: return expert({kEtpAxis, kEpAxis});
    case GroupKind::kTpEpPp: return expert({kEtpAxis, kEpAxis, kPpAxis});
    case GroupKind::kEdp: return expert({kEdpAxis});
    case GroupKind::kEmbedding:
    case GroupKind::kPositionEmbedding: break;
  }
  return dense({});
}

int CoordOf(const RankCoords& c, Axis axis) {
  switch (axis) {
    case kPpAxis: return c.pp;
    case kDpAxis: return c.dp;
    case kCpAxis: return c.cp;
    case kTpAxis: return c.tp;
    case kEdpAxis: return c.edp;
    case kEpAxis: return c.ep;
    case kEtpAxis: return c.etp;
    case kAxisCount: break;
  }
  return 0;
}

int AxisSize(const Layout& l, Axis axis) {
  const std::array<int, kAxisCount> sizes = {l.pp, l.dp, l.cp, l.tp, l.edp, l.ep, l.etp};
  return sizes[axis];
}

bool InView(Axis axis, bool expert) {
  return axis == kPpAxis || (expert ? axis >= kEdpAxis : axis <= kTpAxis);
}

Status Broken(int invariant, const std::string& where) {
  return Status::Error("rank map invariant broken (a bug): '" + RankMapInvariants()[invariant] +
                       "': " + where);
}

std::string Str(long long v) { return std::to_string(v); }

// Invariants 0 and 1: a view is a permutation whose positions decode to the
// rank's coordinates.
Status CheckView(const RankMap& map, bool expert, int invariant) {
  const Layout& l = map.layout();
  const std::vector<int>& view = expert ? map.expert_view() : map.dense_view();
  const int w = map.world();
  if (static_cast<int>(view.size()) != w) return Broken(invariant, "size " + Str(view.size()));
  std::vector<bool> seen(w, false);
  const std::array<Axis, 4> dims = expert ? std::array<Axis, 4>{kPpAxis, kEdpAxis, kEpAxis, kEtpAxis}
                                          : std::array<Axis, 4>{kPpAxis, kDpAxis, kCpAxis, kTpAxis};
  for (int i = 0; i < w; ++i) {
    const int rank = view[i];
    if (rank < 0 || rank >= w || seen[rank])
      return Broken(invariant, "element " + Str(i) + " = " + Str(rank));
    seen[rank] = true;
    int rest = i;  // decode the row-major index, last dim fastest
    for (int d = 3; d >= 0; --d) {
      const int size = AxisSize(l, dims[d]);
      if (CoordOf(map.coords(rank), dims[d]) != rest % size)
        return Broken(invariant, "rank " + Str(rank) + " at element " + Str(i) + " has " +
                                     kAxisNames[dims[d]] + " coordinate " +
                                     Str(CoordOf(map.coords(rank), dims[d])));
      rest /= size;
    }
  }
  return Status();
}

// Invariants 2-5 for one kind: exactly-once cover, sizes, shared fixed
// coordinates, increasing order.
Status CheckKind(const RankMap& map, GroupKind kind) {
  const Layout& l = map.layout();
  const KindAxes axes = AxesOf(kind);
  const Groups& groups = map.groups(kind);
  const std::string name = Name(kind);
  int expected_size = 1;
  for (int a = 0; a < kAxisCount; ++a)
    if (axes.varies[a]) expected_size *= AxisSize(l, static_cast<Axis>(a));

  std::vector<int> times_seen(map.world(), 0);
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<int>& group = groups[g];
    const std::string where = name + " group " + Str(g) + " " + export_util::RankList(group);
    if (static_cast<int>(group.size()) != expected_size)
      return Broken(3, where + " has " + Str(group.size()) + " ranks, expected " + Str(expected_size));
    for (size_t i = 0; i < group.size(); ++i) {
      const int rank = group[i];
      if (rank < 0 || rank >= map.world()) return Broken(2, where + " holds rank " + Str(rank));
      ++times_seen[rank];
      if (i > 0 && group[i - 1] >= rank) return Broken(5, where + " is not increasing");
      for (int a = 0; a < kAxisCount; ++a) {
        const Axis axis = static_cast<Axis>(a);
        if (!InView(axis, axes.expert) || axes.varies[a]) continue;
        if (CoordOf(map.coords(rank), axis) != CoordOf(map.coords(group[0]), axis))
          return Broken(
              4, where + ": ranks " + Str(group[0]) + " and " + Str(rank) + " differ in " + kAxisNames[a]);
      }
    }
    if (g > 0 && groups[g - 1][0] >= group[0]) return Broken(5, where + " listed out of order");
  }
  for (int rank = 0; rank < map.world(); ++rank)
    if (times_seen[rank] != 1)
      return Broken(2, "rank " + Str(rank) + " is in " + Str(times_seen[rank]) + " " + name + " groups");
  return Status();
}

// Invariant 6: a pp group shares the non-pp coordinates of both views and
// walks the stages in order.
Status CheckPipelineGroups(const RankMap& map) {
  for (const std::vector<int>& group : map.groups(GroupKind::kPp)) {
    const RankCoords& first = map.coords(group[0]);
    for (size_t i = 0; i < group.size(); ++i) {
      const RankCoords& c = map.coords(group[i]);
      if (c.pp != static_cast<int>(i) || c.dp != first.dp || c.cp != first.cp || c.tp != first.tp ||
          c.edp != first.edp || c.ep != first.ep || c.etp != first.etp)
        return Broken(6, "pp group " + export_util::RankList(group) + " at rank " + Str(group[i]));
    }
  }
  return Status();
}

// Invariant 7: every stage is covered by exactly G / EP ep groups lying in it.
Status CheckEpPartitionsStages(const RankMap& map) {
  const Layout& l = map.layout();
  std::vector<int> groups_per_stage(l.pp, 0);
  for (const std::vector<int>& group : map.groups(GroupKind::kEp)) {
    const int stage = map.coords(group[0]).pp;
    for (int rank : group)
      if (map.coords(rank).pp != stage)
        return Broken(7, "ep group " + export_util::RankList(group) + " spans stages");
    ++groups_per_stage[stage];
  }
  for (int p = 0; p < l.pp; ++p)
    if (groups_per_stage[p] * l.ep != l.world / l.pp)
      return Broken(7, "stage " + Str(p) + " has " + Str(groups_per_stage[p]) + " ep groups");
  return Status();
}

// Invariant 8: each dp_cp group is the union of the dp groups of its ranks.
// Linear time: stamps mark the current group's ranks and dp groups.
Status CheckDpCpIsProduct(const RankMap& map) {
  const Groups& dp = map.groups(GroupKind::kDp);
  std::vector<int> dp_group_of(map.world(), -1);
  for (size_t g = 0; g < dp.size(); ++g)
    for (int rank : dp[g]) dp_group_of[rank] = static_cast<int>(g);
  std::vector<int> rank_stamp(map.world(), -1);
  std::vector<int> dp_stamp(dp.size(), -1);
  const Groups& dp_cp = map.groups(GroupKind::kDpCp);
  for (size_t g = 0; g < dp_cp.size(); ++g) {
    const std::vector<int>& group = dp_cp[g];
    const int stamp = static_cast<int>(g);
    for (int rank : group) rank_stamp[rank] = stamp;
    int dp_groups_touched = 0;
    for (int rank : group) {
      const int d = dp_group_of[rank];
      if (dp_stamp[d] == stamp) continue;
      dp_stamp[d] = stamp;
      ++dp_groups_touched;
      for (int member : dp[d])
        if (rank_stamp[member] != stamp)
          return Broken(8, "dp_cp group " + export_util::RankList(group) + " lacks rank " + Str(member));
    }
    if (dp_groups_touched != map.layout().cp)
      return Broken(8, "dp_cp group " + export_util::RankList(group) + " joins " + Str(dp_groups_touched) +
                           " dp groups, not CP");
  }
  return Status();
}

// Invariant 9: Megatron's embedding ranks (EmbeddingStages of the map's options).
Status CheckEmbeddingGroups(const RankMap& map) {
  const Groups& pp = map.groups(GroupKind::kPp);
  const Groups& emb = map.groups(GroupKind::kEmbedding);
  const Groups& pos = map.groups(GroupKind::kPositionEmbedding);
  if (emb.size() != pp.size() || pos.size() != pp.size()) return Broken(9, "group counts differ from pp");
  const std::vector<int> stages = EmbeddingStages(map.layout(), map.options());
  for (size_t g = 0; g < pp.size(); ++g) {
    std::vector<int> want;
    for (int s : stages)
      if (s < static_cast<int>(pp[g].size())) want.push_back(pp[g][static_cast<size_t>(s)]);
    if (emb[g] != want || pos[g] != std::vector<int>{pp[g].front()})
      return Broken(9, "pp group " + export_util::RankList(pp[g]));
  }
  return Status();
}

// Invariant 10: distinct GPUs.
Status CheckPlacement(const RankMap& map) {
  std::vector<int> gpus;
  gpus.reserve(map.world());
  for (int r = 0; r < map.world(); ++r) {
    if (map.place(r).gpu < 0) return Broken(10, "rank " + Str(r) + " on GPU " + Str(map.place(r).gpu));
    gpus.push_back(map.place(r).gpu);
  }
  std::sort(gpus.begin(), gpus.end());
  for (size_t i = 1; i < gpus.size(); ++i)
    if (gpus[i] == gpus[i - 1]) return Broken(10, "GPU " + Str(gpus[i]) + " holds two ranks");
  if (map.idle_gpus() < 0) return Broken(10, "idle_gpus " + Str(map.idle_gpus()));
  return Status();
}

}  // namespace

const std::vector<std::string>& RankMapInvariants() {
  static const std::vector<std::string> kInvariants = {
      "dense view [pp,dp,cp,tp] is a permutation of 0..W-1 and element (p,d,c,t) is the rank with those "
      "dense coordinates",
      "expert view [pp,edp,ep,etp] is a permutation of 0..W-1 and element (p,e,x,y) is the rank with those "
      "expert coordinates",
      "every rank is in exactly one group of every kind except embedding and position_embedding",
      "every group of a kind has the product of its axes' sizes (tp TP, dp_cp DP*CP, mp TP*PP, tp_ep ETP*EP, "
      "tp_ep_pp ETP*EP*PP, edp EDP, ...)",
      "the ranks of a group agree on every coordinate of its view outside the group's axes",
      "groups are listed by increasing first rank and ranks within a group increase (Megatron's order)",
      "pp groups are the same in both views: a pp group's ranks share dp, cp, tp, edp, ep and etp and list "
      "stages 0..PP-1 in order",
      "ep groups partition each pipeline stage: every ep group lies in one stage and each stage holds G/EP "
      "of them",
      "each dp_cp group is the union of CP dp groups (dp x cp)",
      "embedding groups are [first, last] of each pp group for tied embeddings, [first] and the stages "
      "holding MTP layers for untied ones (the pp group itself when PP == 1); position_embedding groups "
      "are [first]",
      "every rank runs on a distinct GPU of the cluster; idle_gpus = cluster GPUs - W",
  };
  return kInvariants;
}

Status CheckRankMapInvariants(const RankMap& map) {
  if (Status s = CheckView(map, /*expert=*/false, 0); !s.ok()) return s;
  if (Status s = CheckView(map, /*expert=*/true, 1); !s.ok()) return s;
  for (int k = 0; k < kGroupKindCount; ++k) {
    const auto kind = static_cast<GroupKind>(k);
    if (kind == GroupKind::kEmbedding || kind == GroupKind::kPositionEmbedding) continue;
    if (Status s = CheckKind(map, kind); !s.ok()) return s;
  }
  if (Status s = CheckPipelineGroups(map); !s.ok()) return s;
  if (Status s = CheckEpPartitionsStages(map); !s.ok()) return s;
  if (Status s = CheckDpCpIsProduct(map); !s.ok()) return s;
  if (Status s = CheckEmbeddingGroups(map); !s.ok()) return s;
  return CheckPlacement(map);
}

Result<std::string> ExportRankMap(const RankMap& map, ExportFormat format, const ExportContext& ctx) {
  if (Status s = CheckRankMapInvariants(map); !s.ok()) return s;
  switch (format) {
    case ExportFormat::kRankMap: return ExportRankMapJson(map, ctx);
    case ExportFormat::kMegatron: return ExportMegatron(map, ctx);
    case ExportFormat::kTorch: return ExportTorch(map, ctx);
    case ExportFormat::kTorchtitan: return ExportTorchtitan(map, ctx);
    case ExportFormat::kOlmoCore: return ExportOlmoCore(map, ctx);
    case ExportFormat::kJax: return ExportJax(map, ctx);
    case ExportFormat::kMaxText: return ExportMaxText(map, ctx);
    case ExportFormat::kTorchtitanToml: return ExportTorchtitanToml(map, ctx);
  }
  return Status::Error("unknown export format");
}

}  // namespace foldplan
