// OLMo-core's folded MoE path (doc/folding.md section 4): dense mesh
// (pp, dp, cp) with cp fastest, rank = p*G + d*CP + c; MoE mesh
// (pp, ep_dp, ep_mp) with ep_mp fastest, rank = p*G + i*EP + j. It has no
// tensor parallelism on this path, so tp == etp == 1. Its groups are
// recomputed and compared with the map's; any difference is a refusal.
//
// The output is a plain Python dict of degrees and mesh shapes, not calls
// into OLMo-core: its config class names and fields vary between versions,
// so the comments name where the numbers go instead of inventing an API.
// Its pipeline schedules are torch.distributed.pipelining's, named so; one
// torch has no name for is refused.
#include <string>
#include <vector>

#include "planner/export_util.h"
#include "planner/rank_export.h"

namespace foldplan {
namespace {

std::string Str(long long v) { return std::to_string(v); }

Status Refuse(const std::string& why) {
  return Status::Error("olmo-core cannot express this layout: " + why);
}

std::vector<std::pair<GroupKind, Groups>> OlmoCoreGroups(const Layout& l) {
  const std::vector<int> dense = {l.pp, l.dp, l.cp};
  const std::vector<int> moe = {l.pp, l.edp, l.ep};
  using export_util::RowMajorMeshGroups;
  return {
      {GroupKind::kCp, RowMajorMeshGroups(dense, {false, false, true})},
      {GroupKind::kDp, RowMajorMeshGroups(dense, {false, true, false})},
      {GroupKind::kDpCp, RowMajorMeshGroups(dense, {false, true, true})},
      {GroupKind::kPp, RowMajorMeshGroups(dense, {true, false, false})},
      {GroupKind::kEp, RowMajorMeshGroups(moe, {false, false, true})},
      {GroupKind::kEdp, RowMajorMeshGroups(moe, {false, true, false})},
  };
}

}  // namespace

Result<std::string> ExportOlmoCore(const RankMap& map, const ExportContext& ctx) {
  const Layout& l = map.layout();
  if (l.tp != 1)
    return Refuse("its folded MoE path has no tensor parallelism (tp must be 1, this layout has tp " +
                  Str(l.tp) + ")");
  if (l.etp != 1)
    return Refuse(
        "its folded MoE path has no expert tensor parallelism (etp must be 1, this layout has etp " +
        Str(l.etp) + ")");
  if (!export_util::TorchPipelineSchedule(l.schedule_or_default()))
    return Refuse(export_util::NoTorchScheduleReason(l.schedule_or_default(), "OLMo-core"));
  for (const auto& [kind, theirs] : OlmoCoreGroups(l)) {
    const std::string mismatch =
        export_util::DescribeGroupMismatch(Name(kind), map.groups(kind), theirs, "OLMo-core");
    if (!mismatch.empty())
      return Refuse(
          "it numbers ranks with pp outermost (rank = p*G + d*CP + c and p*G + i*EP + j), this "
          "layout's order '" +
          l.order + "' numbers them otherwise: " + mismatch);
  }

  const int stage = l.world / l.pp;
  std::string out = "# OLMo-core folded MoE parallelism for " + FormatLayout(l) + " (foldplan export).\n";
  out += "# Its meshes were checked to give the rank map's cp, dp, dp_cp, pp, ep and edp groups.\n";
  out += "# Degrees only: put them into your OLMo-core train module's parallel configs\n";
  out += "# (data-parallel, context-parallel, expert-parallel and pipeline-parallel degrees;\n";
  out += "# class and field names are per your OLMo-core version's train module).\n";
  out += export_util::PlacementNote(map, "#");
  out += "olmo_core_parallelism = {\n";
  out += "    \"world_size\": " + Str(l.world) + ",\n";
  out += "    \"pp\": " + Str(l.pp) + ",\n";
  if (l.pp > 1)
    out += "    \"pp_schedule\": \"" + std::string(export_util::TorchPipelineSchedule(l.schedule_or_default())) +
           "\",  # torch.distributed.pipelining's name; the schedule type's spelling is per version\n";
  out += "    \"dp\": " + Str(l.dp) + ",  # data loader shards by dp; dense grads reduce over dp x cp\n";
  out += "    \"cp\": " + Str(l.cp) + ",\n";
  out += "    \"cp_style\": \"" + std::string(Name(l.cp_style)) + "\",\n";
  out += "    \"ep\": " + Str(l.ep) + ",  # ep_mp: experts partitioned over these ranks\n";
  out += "    \"ep_dp\": " + Str(l.edp) + ",  # expert grads reduce over ep_dp\n";
  out += "    \"micro_batch_size\": " + Str(l.mbs) + ",\n";
  if (ctx.model && ctx.model->is_moe() && ctx.model->moe->experts % l.ep == 0)
    out += "    \"local_experts\": " + Str(ctx.model->moe->experts / l.ep) +
           ",  # expert e on ep_mp rank e // " + Str(ctx.model->moe->experts / l.ep) + "\n";
  out += "    # rank = p*" + Str(stage) + " + d*" + Str(l.cp) + " + c\n";
  out += "    \"dense_mesh\": {\"dims\": [\"pp\", \"dp\", \"cp\"], \"shape\": [" + Str(l.pp) + ", " +
         Str(l.dp) + ", " + Str(l.cp) + "]},\n";
  out += "    # rank = p*" + Str(stage) + " + i*" + Str(l.ep) + " + j\n";
  out += "    \"moe_mesh\": {\"dims\": [\"pp\", \"ep_dp\", \"ep_mp\"], \"shape\": [" + Str(l.pp) + ", " +
         Str(l.edp) + ", " + Str(l.ep) + "]},\n";
  out += "}\n";
  return out;
}

}  // namespace foldplan
