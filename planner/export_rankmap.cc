// foldplan.rankmap/v1: the whole rank map as JSON (doc/trainers.md).
#include <string>

#include "core/formats.h"
#include "planner/export_util.h"
#include "planner/placement.h"
#include "planner/rank_export.h"

namespace foldplan {
namespace {

using Json = nlohmann::ordered_json;

Json Degrees(const Layout& l) {
  return Json{{"pp", l.pp}, {"vpp", l.vpp}, {"dp", l.dp},   {"cp", l.cp},  {"tp", l.tp},
              {"ep", l.ep}, {"etp", l.etp}, {"edp", l.edp}, {"mbs", l.mbs}};
}

Json Views(const RankMap& map) {
  const Layout& l = map.layout();
  return Json{
      {"dense",
       {{"dims", {"pp", "dp", "cp", "tp"}},
        {"shape", {l.pp, l.dp, l.cp, l.tp}},
        {"ranks", map.dense_view()}}},
      {"expert",
       {{"dims", {"pp", "edp", "ep", "etp"}},
        {"shape", {l.pp, l.edp, l.ep, l.etp}},
        {"ranks", map.expert_view()}}},
  };
}

// Per-rank coordinate arrays, indexed by rank.
Json Coords(const RankMap& map) {
  std::vector<int> pp, dp, cp, tp, edp, ep, etp;
  for (int r = 0; r < map.world(); ++r) {
    const RankCoords& c = map.coords(r);
    pp.push_back(c.pp);
    dp.push_back(c.dp);
    cp.push_back(c.cp);
    tp.push_back(c.tp);
    edp.push_back(c.edp);
    ep.push_back(c.ep);
    etp.push_back(c.etp);
  }
  return Json{{"pp", pp}, {"dp", dp}, {"cp", cp}, {"tp", tp}, {"edp", edp}, {"ep", ep}, {"etp", etp}};
}

Json GroupsJson(const RankMap& map) {
  Json groups = Json::object();
  for (int k = 0; k < kGroupKindCount; ++k) {
    const auto kind = static_cast<GroupKind>(k);
    groups[Name(kind)] = map.groups(kind);
  }
  return groups;
}

// Parallel arrays indexed by rank: compact for 10^4+ ranks.
Json PlacementJson(const RankMap& map) {
  std::vector<int> gpu, node, local_gpu, domain, rail;
  for (int r = 0; r < map.world(); ++r) {
    const PhysicalPlace& p = map.place(r);
    gpu.push_back(p.gpu);
    node.push_back(p.node);
    local_gpu.push_back(p.local_gpu);
    domain.push_back(p.domain);
    rail.push_back(p.rail);
  }
  return Json{{"kind", Name(map.layout().placement)},
              {"heavy_block_ranks", HeavyBlockRanks(map)},
              {"gpu", gpu},
              {"node", node},
              {"local_gpu", local_gpu},
              {"domain", domain},
              {"rail", rail}};
}

Json StraddlesJson(const RankMap& map) {
  Json out = Json::array();
  for (const Straddle& s : map.Straddles()) {
    out.push_back(Json{{"kind", Name(s.kind)},
                       {"group_index", s.group_index},
                       {"ranks", map.groups(s.kind)[s.group_index]},
                       {"ranks_per_domain", s.ranks_per_domain}});
  }
  return out;
}

constexpr const char* kExpertRule =
    "expert e of a MoE layer lives on the ranks whose ep coordinate is e // local_experts; the etp ranks of "
    "that coordinate shard it, its edp ranks hold copies";

Result<Json> ExpertOwner(const RankMap& map, const ModelSpec* model) {
  const int ep = map.layout().ep;
  if (model == nullptr || !model->is_moe())
    return Json{{"experts", nullptr}, {"local_experts", nullptr}, {"rule", kExpertRule}};
  const int experts = model->moe->experts;
  if (experts % ep != 0)
    return Status::Error("rankmap: model " + model->name + " has " + std::to_string(experts) +
                         " experts, not divisible by ep " + std::to_string(ep));
  const int local = experts / ep;
  std::vector<int> first_expert;
  for (int r = 0; r < map.world(); ++r) first_expert.push_back(map.coords(r).ep * local);
  return Json{
      {"experts", experts}, {"local_experts", local}, {"rule", kExpertRule}, {"first_expert", first_expert}};
}

}  // namespace

Result<std::string> ExportRankMapJson(const RankMap& map, const ExportContext& ctx) {
  const Layout& l = map.layout();
  Json root;
  root["schema"] = kRankMapSchema;
  root["layout"] = FormatLayout(l);
  root["world_size"] = map.world();
  root["degrees"] = Degrees(l);
  root["order"] = l.order;
  root["cp_style"] = Name(l.cp_style);
  root["recompute"] = Name(l.recompute);
  // Only a named schedule other than the implied one (vpp says that one).
  if (const auto schedule = l.non_default_schedule()) root["schedule"] = Name(*schedule);
  if (!l.stage_layers.empty()) root["stage_layers"] = l.stage_layers;
  if (ctx.cluster) {
    const ClusterSpec& c = *ctx.cluster;
    root["cluster"] = Json{{"name", c.name},
                           {"gpus", c.total_gpus()},
                           {"gpus_per_node", c.gpus_per_node},
                           {"nvlink_domain_gpus", c.nvlink_domain_gpus},
                           {"nics_per_node", c.nics_per_node}};
  }
  if (ctx.model) root["model"] = Json{{"name", ctx.model->name}, {"layers", ctx.model->layers}};
  if (ctx.job) root["job"] = Json{{"seq_len", ctx.job->seq_len}, {"global_batch", ctx.job->global_batch}};
  if (ctx.extra_fields) {
    for (const auto& [key, value] : ctx.extra_fields->items()) root[key] = value;
  }
  root["recipe"] = Json{{"recompute", Name(l.recompute)},     {"dispatcher", Name(l.dispatcher)},
                        {"a2a_overlap", l.a2a_overlap},       {"precision", Name(l.precision)},
                        {"fsdp", l.fsdp},                     {"tp_overlap", l.tp_overlap},
                        {"cuda_graphs", Name(l.cuda_graphs)}};
  root["views"] = Views(map);
  root["coords"] = Coords(map);
  root["groups"] = GroupsJson(map);
  root["roles"] = Json{{"data_loader", "dp"},
                       {"loss_and_dense_grads", "dp_cp"},
                       {"expert_shard", "ep"},
                       {"expert_grads", "edp"},
                       {"pipeline", "pp"}};
  root["placement"] = PlacementJson(map);
  root["idle_gpus"] = map.idle_gpus();
  root["straddles"] = StraddlesJson(map);
  Result<Json> owner = ExpertOwner(map, ctx.model);
  if (!owner.ok()) return owner.status();
  root["expert_owner"] = *owner;
  root["invariants"] = RankMapInvariants();
  return export_util::PrettyJson(root);
}

}  // namespace foldplan
