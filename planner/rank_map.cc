#include "planner/rank_map.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>

#include "inputs/checked_product.h"
#include "planner/pipeline.h"
#include "planner/placement.h"
#include "planner/rank_generator.h"

namespace foldplan {

const char* Name(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTp: return "tp";
    case GroupKind::kCp: return "cp";
    case GroupKind::kDp: return "dp";
    case GroupKind::kDpCp: return "dp_cp";
    case GroupKind::kTpCp: return "tp_cp";
    case GroupKind::kTpDp: return "tp_dp";
    case GroupKind::kTpDpCp: return "tp_dp_cp";
    case GroupKind::kMp: return "mp";
    case GroupKind::kPp: return "pp";
    case GroupKind::kEmbedding: return "embedding";
    case GroupKind::kPositionEmbedding: return "position_embedding";
    case GroupKind::kEp: return "ep";
    case GroupKind::kEtp: return "etp";
    case GroupKind::kTpEp: return "tp_ep";
    case GroupKind::kTpEpPp: return "tp_ep_pp";
    case GroupKind::kEdp: return "edp";
  }
  return "?";
}

std::optional<GroupKind> GroupKindNamed(std::string_view name) {
  for (int k = 0; k < kGroupKindCount; ++k) {
    if (name == Name(GroupKind(k))) return GroupKind(k);
  }
  return std::nullopt;
}

bool IsHeavy(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTp:
    case GroupKind::kCp:
    case GroupKind::kTpCp:
    case GroupKind::kEp:
    case GroupKind::kEtp:
    case GroupKind::kTpEp: return true;
    default: return false;
  }
}

namespace {

std::string Str(long long v) { return std::to_string(v); }

}  // namespace

Status CheckLayoutDegrees(const Layout& l) {
  const std::pair<const char*, int> degrees[] = {{"world", l.world}, {"pp", l.pp},  {"dp", l.dp},
                                                 {"cp", l.cp},       {"tp", l.tp},  {"ep", l.ep},
                                                 {"etp", l.etp},     {"edp", l.edp}};
  for (const auto& [name, value] : degrees)
    if (value < 1)
      return Status::Error(std::string("layout: ") + name + " must be >= 1, found " + Str(value));
  // Checked: a hand-built layout's degrees need not multiply to its world.
  const std::optional<int64_t> dense = CheckedProduct({l.pp, l.tp, l.cp, l.dp});
  const std::optional<int64_t> expert = CheckedProduct({l.pp, l.etp, l.ep, l.edp});
  auto text = [](const std::optional<int64_t>& p) { return p ? Str(*p) : "more than " + Str(kMaxWorldSize); };
  if (dense != l.world)
    return Status::Error("layout: pp*tp*cp*dp = " + Str(l.pp) + "*" + Str(l.tp) + "*" + Str(l.cp) + "*" +
                         Str(l.dp) + " = " + text(dense) + " != world " + Str(l.world));
  if (expert != l.world)
    return Status::Error("layout: pp*etp*ep*edp = " + Str(l.pp) + "*" + Str(l.etp) + "*" + Str(l.ep) + "*" +
                         Str(l.edp) + " = " + text(expert) + " != world " + Str(l.world));
  return Status();
}

RankMapOptions RankMapOptionsFor(const ModelSpec* model) {
  RankMapOptions o;
  if (model == nullptr) return o;
  o.untied_embeddings = !model->tied_embeddings;
  o.mtp_layers = model->mtp_layers;
  return o;
}

std::vector<int> EmbeddingStages(const Layout& l, const RankMapOptions& o) {
  const int pp = std::max(1, l.pp);
  if (pp == 1) return {0};
  if (!o.untied_embeddings) return {0, pp - 1};
  // Untied: the first stage, and every stage holding an MTP layer (the MTP
  // block embeds the next tokens with the input embedding).
  std::vector<int> stages = {0};
  const int virtual_stages = pp * std::max(1, l.vpp);
  const PipelineSchedule schedule = l.schedule_or_default();
  const bool mtp_given = static_cast<int>(l.stage_mtp.size()) == virtual_stages && o.mtp_layers > 0 &&
                         std::accumulate(l.stage_mtp.begin(), l.stage_mtp.end(), int64_t{0}) == o.mtp_layers;
  if (mtp_given) {
    for (int c = 0; c < virtual_stages; ++c)
      if (l.stage_mtp[static_cast<size_t>(c)] > 0) stages.push_back(PipelineRankOf(schedule, pp, c));
  } else if (o.mtp_layers > 0) {
    stages.push_back(PipelineRankOf(schedule, pp, virtual_stages - 1));
  }
  std::sort(stages.begin(), stages.end());
  stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  return stages;
}

Result<RankMap> BuildRankMap(const Layout& layout, const ClusterSpec& cluster, const RankMapOptions& options) {
  if (Status s = CheckLayoutDegrees(layout); !s.ok()) return s;
  if (Status s = CheckClusterShape(cluster); !s.ok()) return s;
  if (layout.world > cluster.total_gpus())
    return Status::Error("layout: world " + Str(layout.world) + " ranks > " + Str(cluster.total_gpus()) +
                         " GPUs in cluster " + cluster.name);

  Result<FoldedGenerators> gens = MakeFoldedGenerators(layout);
  if (!gens.ok()) return gens.status();
  Result<GroupSet> groups = BuildFoldedGroups(*gens, layout);
  if (!groups.ok()) return groups.status();

  RankMap map;
  map.layout_ = layout;
  map.options_ = options;
  const int world = layout.world;
  const RankGenerator& dense = gens->dense;
  const RankGenerator& expert = gens->expert;
  map.coords_.resize(world);
  map.dense_view_.assign(world, -1);
  map.expert_view_.assign(world, -1);
  // (stride, size) per coordinate, looked up once: coordinate = rank / stride % size.
  struct Digit {
    int stride, size;
    int of(int rank) const { return rank / stride % size; }
  };
  auto digit = [](const RankGenerator& gen, const char* axis) {
    return Digit{gen.Stride(axis), gen.Size(axis)};
  };
  const Digit pp = digit(dense, "pp"), dp = digit(dense, "dp"), cp = digit(dense, "cp"),
              tp = digit(dense, "tp");
  const Digit edp = digit(expert, "dp"), ep = digit(expert, "ep"), etp = digit(expert, "tp");
  for (int rank = 0; rank < world; ++rank) {
    RankCoords& c = map.coords_[rank];
    c.pp = pp.of(rank);
    c.dp = dp.of(rank);
    c.cp = cp.of(rank);
    c.tp = tp.of(rank);
    c.edp = edp.of(rank);
    c.ep = ep.of(rank);
    c.etp = etp.of(rank);
    // Row-major [pp, dp, cp, tp] and [pp, edp, ep, etp]. The expert pp
    // coordinate equals the dense one: the pp groups were checked equal.
    map.dense_view_[((c.pp * layout.dp + c.dp) * layout.cp + c.cp) * layout.tp + c.tp] = rank;
    map.expert_view_[((c.pp * layout.edp + c.edp) * layout.ep + c.ep) * layout.etp + c.etp] = rank;
  }

  const int block_ranks = HeavyBlockRanks(world, *groups);
  Result<std::vector<PhysicalPlace>> places = PlaceRanks(world, layout.placement, block_ranks, cluster);
  if (!places.ok()) return places.status();
  map.places_ = std::move(places).value();
  map.groups_ = std::move(groups).value();
  // The embedding groups: the generator's are Megatron's default ([first,
  // last]); the model's ties and MTP stages decide (EmbeddingStages).
  {
    const std::vector<int> stages = EmbeddingStages(layout, options);
    Groups& embedding = map.groups_[static_cast<int>(GroupKind::kEmbedding)];
    embedding.clear();
    for (const std::vector<int>& pp_group : map.groups_[static_cast<int>(GroupKind::kPp)]) {
      std::vector<int> ranks;
      for (int s : stages) ranks.push_back(pp_group[static_cast<size_t>(s)]);
      embedding.push_back(std::move(ranks));
    }
  }
  map.idle_gpus_ = cluster.total_gpus() - world;
  return map;
}

}  // namespace foldplan
