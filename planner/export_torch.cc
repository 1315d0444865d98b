// A Python snippet building torch DeviceMeshes from the map's real rank
// arrays. A DeviceMesh accepts any permutation of ranks, so every layout
// and every order string can be expressed; nothing is refused.
#include <string>

#include "planner/export_util.h"
#include "planner/rank_export.h"

namespace foldplan {
namespace {

std::string Str(long long v) { return std::to_string(v); }

// The group lists of one kind as a Python list literal, wrapped.
std::string PythonGroups(const Groups& groups) {
  std::string out = "[";
  for (size_t g = 0; g < groups.size(); ++g) {
    out += (g ? ",\n    " : "") + export_util::RankList(groups[g]);
  }
  return out + "]";
}

std::string ExpertOwnerSentence(const Layout& l, const ModelSpec* model) {
  if (model && model->is_moe() && model->moe->experts % l.ep == 0)
    return "Expert e of " + Str(model->moe->experts) + " lives on ep coordinate e // " +
           Str(model->moe->experts / l.ep) + ".";
  return "Expert e lives on ep coordinate e // (experts // " + Str(l.ep) + ").";
}

}  // namespace

Result<std::string> ExportTorch(const RankMap& map, const ExportContext& ctx) {
  const Layout& l = map.layout();
  std::string out;
  out += "# torch DeviceMeshes for " + FormatLayout(l) + " (foldplan export).\n";
  out += "# Run on every rank (all ranks must execute it, in this order) after the default\n";
  out += "# process group exists, e.g. under torchrun:\n";
  out += "#   torch.distributed.init_process_group(\"nccl\")\n";
  out += "#   torch.cuda.set_device(int(os.environ[\"LOCAL_RANK\"]))\n";
  out += export_util::PlacementNote(map, "#");
  out += "import torch\n";
  out += "import torch.distributed as dist\n";
  out += "from torch.distributed.device_mesh import DeviceMesh\n\n";

  out += "# Dense (attention) view: element (p, d, c, t) is the rank with those coordinates.\n";
  out += "dense_ranks = torch.tensor(" + export_util::WrappedRankList(map.dense_view(), 4) + ").reshape(" +
         Str(l.pp) + ", " + Str(l.dp) + ", " + Str(l.cp) + ", " + Str(l.tp) + ")\n";
  out +=
      "dense_mesh = DeviceMesh(\"cuda\", dense_ranks, mesh_dim_names=(\"pp\", \"dp\", \"cp\", \"tp\"))\n\n";

  out += "# Expert (MoE) view: element (p, e, x, y) is the rank with expert coordinates\n";
  out += "# (pp, edp, ep, etp) = (p, e, x, y). " + ExpertOwnerSentence(l, ctx.model) + "\n";
  out += "expert_ranks = torch.tensor(" + export_util::WrappedRankList(map.expert_view(), 4) + ").reshape(" +
         Str(l.pp) + ", " + Str(l.edp) + ", " + Str(l.ep) + ", " + Str(l.etp) + ")\n";
  out +=
      "expert_mesh = DeviceMesh(\"cuda\", expert_ranks, mesh_dim_names=(\"pp\", \"edp\", \"ep\", "
      "\"etp\"))\n\n";

  out += "# Loss and dense gradients reduce over dp x cp (the data loader shards by dp only);\n";
  out += "# expert gradients reduce over expert_mesh[\"edp\"].\n";
  out += "dp_cp_mesh = dense_mesh[\"dp\", \"cp\"]._flatten(\"dp_cp\")\n";
  out += "tp_cp_mesh = dense_mesh[\"cp\", \"tp\"]._flatten(\"tp_cp\")\n";
  out += "tp_ep_mesh = expert_mesh[\"ep\", \"etp\"]._flatten(\"tp_ep\")\n\n";

  out += "# Embedding groups (first and last stage of each pipeline group) are no mesh dimension.\n";
  out += "embedding_group, _ = dist.new_subgroups_by_enumeration(\n    " +
         PythonGroups(map.groups(GroupKind::kEmbedding)) + ")\n";
  out += "position_embedding_group, _ = dist.new_subgroups_by_enumeration(\n    " +
         PythonGroups(map.groups(GroupKind::kPositionEmbedding)) + ")\n";
  return out;
}

}  // namespace foldplan
