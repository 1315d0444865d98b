// torchtitan [parallelism] settings (doc/folding.md section 4). torchtitan
// numbers ranks itself: dense mesh (pp, dp_replicate, dp_shard, cp, tp),
// row-major, pp outermost; EP is no world-size factor but borrows the
// innermost ranks of dp_shard x cp (x tp when etp = 1). Its groups are
// recomputed here and compared with the map's; any difference is a refusal.
// Recompute becomes [activation_checkpoint]: full -> "full", any module set
// -> "selective" with selective_ac_option "op" (torchtitan's op-level policy
// is its own, not Megatron's modules; the comment lists foldplan's).
#include <algorithm>
#include <string>
#include <vector>

#include "planner/export_util.h"
#include "planner/rank_export.h"

namespace foldplan {
namespace {

std::string Str(long long v) { return std::to_string(v); }

Status Refuse(const std::string& why) {
  return Status::Error("torchtitan cannot express this layout: " + why);
}

// Degree restrictions torchtitan's ParallelDims asserts, and the pipeline
// schedules it has, with the reason.
Status CheckDegrees(const Layout& l) {
  if (!export_util::TorchPipelineSchedule(l.schedule_or_default()))
    return Refuse(export_util::NoTorchScheduleReason(l.schedule_or_default(), "torchtitan"));
  if (l.cp > 1 && l.cp_style == CpStyle::kUlysses)
    return Refuse("its context parallelism is ring attention only, this layout uses Ulysses CP " + Str(l.cp));
  if (l.ep == 1) {
    // Without EP torchtitan shards experts with the dense TP mesh.
    if (l.etp != l.tp)
      return Refuse("without expert parallelism it shards experts over the TP mesh (etp = tp " + Str(l.tp) +
                    "), this layout has etp " + Str(l.etp));
    return Status();
  }
  if (l.etp != 1 && l.etp != l.tp)
    return Refuse("expert_tensor_parallel_degree must be 1 or tp " + Str(l.tp) + ", this layout has etp " +
                  Str(l.etp));
  if (l.etp == l.tp && l.ep % l.cp != 0)
    return Refuse("with etp = tp its EP borrows dp_shard x cp, so ep " + Str(l.ep) +
                  " must be a multiple of cp " + Str(l.cp));
  if (l.etp != l.tp && l.ep % (l.cp * l.tp) != 0)
    return Refuse("with etp = 1 its EP borrows dp_shard x cp x tp, so ep " + Str(l.ep) +
                  " must be a multiple of cp*tp " + Str(l.cp * l.tp));
  return Status();
}

// torchtitan's groups for the layout's degrees. Dense mesh (pp, dp, cp, tp)
// row-major. Its EP borrowing (ep = dp_shard_in_ep x cp [x tp], the rest of
// dp_shard is the experts' FSDP dim) gives the same groups as a sparse mesh
// (pp, efsdp, ep, etp) row-major, which is how it is computed here.
std::vector<std::pair<GroupKind, Groups>> TorchtitanGroups(const Layout& l) {
  const std::vector<int> dense = {l.pp, l.dp, l.cp, l.tp};
  const int etp = l.ep == 1 ? l.tp : l.etp;
  const std::vector<int> sparse = {l.pp, l.world / (l.pp * l.ep * etp), l.ep, etp};
  using export_util::RowMajorMeshGroups;
  return {
      {GroupKind::kTp, RowMajorMeshGroups(dense, {false, false, false, true})},
      {GroupKind::kCp, RowMajorMeshGroups(dense, {false, false, true, false})},
      {GroupKind::kDp, RowMajorMeshGroups(dense, {false, true, false, false})},
      {GroupKind::kDpCp, RowMajorMeshGroups(dense, {false, true, true, false})},
      {GroupKind::kPp, RowMajorMeshGroups(dense, {true, false, false, false})},
      {GroupKind::kEp, RowMajorMeshGroups(sparse, {false, false, true, false})},
      {GroupKind::kEtp, RowMajorMeshGroups(sparse, {false, false, false, true})},
      {GroupKind::kEdp, RowMajorMeshGroups(sparse, {false, true, false, false})},
  };
}

}  // namespace

Result<std::string> ExportTorchtitan(const RankMap& map, const ExportContext& ctx) {
  const Layout& l = map.layout();
  if (Status s = CheckDegrees(l); !s.ok()) return s;
  for (const auto& [kind, theirs] : TorchtitanGroups(l)) {
    const std::string mismatch =
        export_util::DescribeGroupMismatch(Name(kind), map.groups(kind), theirs, "torchtitan");
    if (!mismatch.empty())
      return Refuse("it numbers ranks (pp, dp_shard, cp, tp) row-major with pp outermost (Megatron order " +
                    std::string(kDefaultOrder) + "), and this layout's order '" + l.order +
                    "' numbers them otherwise: " + mismatch);
  }

  std::string out = "# torchtitan settings for " + FormatLayout(l) + " (foldplan export).\n";
  out += "# Its process groups were checked equal to the rank map's (tp, cp, dp, dp_cp, pp, ep, etp, edp).\n";
  out += export_util::PlacementNote(map, "#");
  if (ctx.job) {
    out += "# [training] (check names against your torchtitan version): seq_len = " + Str(ctx.job->seq_len);
    if (ctx.job->global_batch % l.dp == 0)
      out += ", local_batch_size = " + Str(ctx.job->global_batch / l.dp) + " (global batch " +
             Str(ctx.job->global_batch) + " / dp " + Str(l.dp) + ")";
    out += "\n";
  }
  // An even split of decoder layers is one pipeline_parallel_layers_per_stage;
  // an uneven one has no torchtitan key, so it is only a comment.
  const bool even_split =
      !l.stage_layers.empty() &&
      std::all_of(l.stage_layers.begin(), l.stage_layers.end(), [&](int n) { return n == l.stage_layers[0]; });
  if (l.pp > 1 && !l.stage_layers.empty()) {
    out += "# Stages: pp*vpp = " + Str(l.pp * l.vpp) + " virtual stages of decoder layers, foldplan's split:";
    for (int n : l.stage_layers) out.append(" ").append(Str(n));
    out += ".\n";
    if (even_split)
      out += "# torchtitan counts the embedding and the output as one layer each by default\n"
             "# (pipeline_parallel_first_stage_less_layers / _last_stage_less_layers = 1): set both to 0\n"
             "# where your version has them, so that its stages hold exactly these layers.\n";
    else
      out += "# The split is uneven: torchtitan takes it as module names per stage\n"
             "# (pipeline_parallel_module_fqns_per_model_part), not as a layer count.\n";
  } else if (l.vpp > 1) {
    out += "# vpp " + Str(l.vpp) + ": torchtitan must build pp*vpp = " + Str(l.pp * l.vpp) +
           " stages (set pipeline_parallel_layers_per_stage once the model's layers are known).\n";
  }
  out += "[parallelism]\n";
  out += "data_parallel_replicate_degree = 1\n";
  out += "data_parallel_shard_degree = " + Str(l.dp) + "\n";
  out += "tensor_parallel_degree = " + Str(l.tp) + "\n";
  out += "context_parallel_degree = " + Str(l.cp) + "\n";
  out += "pipeline_parallel_degree = " + Str(l.pp) + "\n";
  out += "expert_parallel_degree = " + Str(l.ep) + "\n";
  out += "expert_tensor_parallel_degree = " + Str(l.ep == 1 ? 1 : l.etp) + "\n";
  if (l.pp > 1) {
    out += std::string("pipeline_parallel_schedule = \"") + export_util::TorchPipelineSchedule(l.schedule_or_default()) +
           "\"\n";
    out += "pipeline_parallel_microbatch_size = " + Str(l.mbs) + "\n";
    if (even_split) out += "pipeline_parallel_layers_per_stage = " + Str(l.stage_layers[0]) + "\n";
  }
  out += "\n[activation_checkpoint]\n";
  if (l.recompute.full()) {
    out += "mode = \"full\"\n";
  } else if (l.recompute.selective()) {
    out += "# foldplan recomputes " + Name(l.recompute) +
           " (Megatron modules); torchtitan's selective AC picks ops by its own policy\n";
    out += "# (\"op\": saves matmul and attention outputs, recomputes the rest), the closest it has.\n";
    out += "mode = \"selective\"\n";
    out += "selective_ac_option = \"op\"\n";
  } else {
    out += "mode = \"none\"\n";
  }
  return out;
}

}  // namespace foldplan
