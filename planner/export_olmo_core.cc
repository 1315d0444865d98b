// OLMo-core's parallelism configs (olmo_core.train.train_module.transformer
// .config), as a Python snippet that imports and builds them: data parallel
// (DataParallelType fsdp for foldplan's fsdp, else ddp), tensor, context
// (Ulysses, or ring with the zig-zag load balancer, Megatron's split of a
// sequence into 2*CP chunks), expert, pipeline (PipelineScheduleType and
// split points) and activation checkpointing (full, or selected_modules
// with OLMo-core's module names for foldplan's recompute modules).
//
// Relied on (doc/rankmap.md "olmo-core"): OLMo-core's world mesh is
// (pp, dp, cp, tp) row-major with tp fastest and its expert mesh is
// (pp, ep_dp, ep) with ep fastest over a stage's ranks; its expert config
// has a degree and no expert tensor parallelism (etp must be 1); its
// PipelineScheduleType has single_1F1B, interleaved_1F1B and gpipe, and no
// DualPipeV or one-stage-per-rank zero bubble. Its groups are recomputed
// and compared with the map's; any difference is a refusal.
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
  const std::vector<int> dense = {l.pp, l.dp, l.cp, l.tp};
  const std::vector<int> moe = {l.pp, l.edp, l.ep};
  using export_util::RowMajorMeshGroups;
  return {
      {GroupKind::kTp, RowMajorMeshGroups(dense, {false, false, false, true})},
      {GroupKind::kCp, RowMajorMeshGroups(dense, {false, false, true, false})},
      {GroupKind::kDp, RowMajorMeshGroups(dense, {false, true, false, false})},
      {GroupKind::kDpCp, RowMajorMeshGroups(dense, {false, true, true, false})},
      {GroupKind::kPp, RowMajorMeshGroups(dense, {true, false, false, false})},
      {GroupKind::kEp, RowMajorMeshGroups(moe, {false, false, true})},
      {GroupKind::kEdp, RowMajorMeshGroups(moe, {false, true, false})},
  };
}

// PipelineScheduleType's member for a schedule, or null.
const char* OlmoSchedule(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::k1F1B: return "single_1F1B";
    case PipelineSchedule::kInterleaved1F1B: return "interleaved_1F1B";
    case PipelineSchedule::kGPipe: return "gpipe";
    case PipelineSchedule::kZeroBubbleH1:
    case PipelineSchedule::kDualPipeV: break;
  }
  return nullptr;
}

// OLMo-core module-name patterns (fnmatch over the model's module FQNs) for
// a Megatron recompute module; the second string says what differs.
std::pair<std::vector<std::string>, std::string> OlmoModules(RecomputeModule m) {
  switch (m) {
    case RecomputeModule::kCoreAttn:
      return {{"blocks.*.attention"}, "its attention module holds the q/k/v/out projections too"};
    case RecomputeModule::kMoeAct:
      return {{"blocks.*.feed_forward_moe.experts"}, "the experts' activation has no module of its own"};
    case RecomputeModule::kLayernorm: return {{"blocks.*.attention_norm", "blocks.*.feed_forward_norm"}, ""};
    case RecomputeModule::kMlaUpProj:
      return {{"blocks.*.attention"}, "MLA's up projections live in the attention module"};
    case RecomputeModule::kMlp: return {{"blocks.*.feed_forward"}, ""};
    case RecomputeModule::kMoe: return {{"blocks.*.feed_forward_moe"}, ""};
    case RecomputeModule::kSharedExperts: return {{"blocks.*.feed_forward_moe.shared_mlp"}, ""};
  }
  return {{}, ""};
}

std::string ActivationCheckpointing(const Recompute& r) {
  if (r.none()) return "ac_config = None  # recompute none\n";
  if (r.full())
    return "ac_config = TransformerActivationCheckpointingConfig(\n"
           "    mode=TransformerActivationCheckpointingMode.full)  # recompute full: every block\n";
  std::string comments, names;
  for (int i = 0; i < kRecomputeModuleCount; ++i) {
    const auto m = static_cast<RecomputeModule>(i);
    if (!r.has(m)) continue;
    const auto [patterns, note] = OlmoModules(m);
    for (const std::string& p : patterns)
      if (names.find("\"" + p + "\"") == std::string::npos) names += (names.empty() ? "" : ", ") + ("\"" + p + "\"");
    comments += "# " + std::string(Name(m)) + " -> " + patterns[0] + (patterns.size() > 1 ? ", ..." : "") +
                (note.empty() ? "" : " (" + note + ")") + "\n";
  }
  return "# recompute " + Name(r) + " as OLMo-core modules:\n" + comments +
         "ac_config = TransformerActivationCheckpointingConfig(\n"
         "    mode=TransformerActivationCheckpointingMode.selected_modules,\n"
         "    modules=[" + names + "])\n";
}

}  // namespace

Result<std::string> ExportOlmoCore(const RankMap& map, const ExportContext& ctx) {
  const Layout& l = map.layout();
  if (l.etp != 1)
    return Refuse(
        "TransformerExpertParallelConfig has only a degree: OLMo-core does not tensor-shard experts (etp must "
        "be 1, this layout has etp " + Str(l.etp) + ")");
  const char* schedule = OlmoSchedule(l.schedule_or_default());
  if (l.pp > 1 && !schedule)
    return Refuse(std::string("TransformerPipelineParallelConfig.schedule: PipelineScheduleType has no ") +
                  Name(l.schedule_or_default()) +
                  " (its members run single_1F1B, interleaved_1F1B, gpipe, looped_BFS and the multi-stage "
                  "interleaved_zero_bubble; none is DualPipeV or a one-stage-per-rank ZB-H1)");
  for (const auto& [kind, theirs] : OlmoCoreGroups(l)) {
    const std::string mismatch =
        export_util::DescribeGroupMismatch(Name(kind), map.groups(kind), theirs, "OLMo-core");
    if (!mismatch.empty())
      return Refuse(
          "its meshes are pp outermost (world mesh (pp, dp, cp, tp) and expert mesh (pp, ep_dp, ep), "
          "row-major), this layout's order '" + l.order + "' numbers ranks otherwise: " + mismatch);
  }

  std::string out = "# OLMo-core parallelism for " + FormatLayout(l) + " (foldplan export).\n";
  out += "# Its world mesh (pp, dp, cp, tp) and expert mesh (pp, ep_dp, ep), row-major, were checked to\n";
  out += "# give the rank map's tp, cp, dp, dp_cp, pp, ep and edp groups.\n";
  out += export_util::PlacementNote(map, "#");
  out += "from olmo_core.distributed.parallel import DataParallelType, PipelineScheduleType\n";
  out += "from olmo_core.train.train_module.transformer.config import (\n";
  out += "    TransformerActivationCheckpointingConfig,\n";
  out += "    TransformerActivationCheckpointingMode,\n";
  out += "    TransformerContextParallelConfig,\n";
  out += "    TransformerDataParallelConfig,\n";
  out += "    TransformerExpertParallelConfig,\n";
  out += "    TransformerPipelineParallelConfig,\n";
  out += "    TransformerTensorParallelConfig,\n";
  out += ")\n\n";

  if (l.fsdp) {
    out += "# fsdp: parameters, gradients and optimizer state sharded over dp " + Str(l.dp) + ".\n";
    out += "dp_config = TransformerDataParallelConfig(\n    name=DataParallelType.fsdp, num_replicas=1, "
           "shard_degree=" + Str(l.dp) + ")\n";
  } else {
    out += "# Megatron's distributed optimizer (ZeRO-1) has no OLMo-core twin: ddp keeps the whole\n";
    out += "# optimizer state on every one of the dp " + Str(l.dp) +
           " replicas (more memory than foldplan counted).\n";
    out += "dp_config = TransformerDataParallelConfig(name=DataParallelType.ddp)\n";
  }
  out += l.tp > 1 ? "tp_config = TransformerTensorParallelConfig(degree=" + Str(l.tp) + ")\n"
                  : std::string("tp_config = None  # tp 1\n");
  if (l.cp == 1) {
    out += "cp_config = None  # cp 1\n";
  } else if (l.cp_style == CpStyle::kUlysses) {
    out += "cp_config = TransformerContextParallelConfig.ulysses(degree=" + Str(l.cp) + ")  # all-to-all over heads\n";
  } else {
    out += "# Ring CP; load balancer zig-zag: each rank holds chunks i and 2*cp-1-i of 2*cp (Megatron's).\n";
    out += "cp_config = TransformerContextParallelConfig.zig_zag(degree=" + Str(l.cp) + ")\n";
  }
  if (l.ep > 1) {
    out += "ep_config = TransformerExpertParallelConfig(degree=" + Str(l.ep) + ")";
    if (ctx.model && ctx.model->is_moe() && ctx.model->moe->experts % l.ep == 0)
      out += "  # " + Str(ctx.model->moe->experts / l.ep) + " local experts; ep_dp " + Str(l.edp);
    else
      out += "  # ep_dp " + Str(l.edp);
    out += "\n";
  } else {
    out += "ep_config = None  # ep 1\n";
  }
  if (l.pp > 1) {
    out += "pp_config = TransformerPipelineParallelConfig(\n    degree=" + Str(l.pp) +
           ", schedule=PipelineScheduleType." + schedule;
    if (!l.stage_layers.empty() && l.stage_layers.size() > 1) {
      // Split points: the first layer of every stage after the first.
      std::string points;
      int layer = 0;
      for (size_t s = 0; s + 1 < l.stage_layers.size(); ++s) {
        layer += l.stage_layers[s];
        points += (points.empty() ? "" : ", ") + Str(layer);
      }
      out += ",\n    split_points=[" + points + "]";
    }
    out += ")";
    if (l.vpp > 1) out += "  # " + Str(l.vpp) + " stages per rank, stage s on rank s % " + Str(l.pp);
    out += "\n";
  } else {
    out += "pp_config = None  # pp 1\n";
  }
  out += ActivationCheckpointing(l.recompute);
  out += "\n# Pass them to TransformerTrainModuleConfig(dp_config=dp_config, tp_config=tp_config,\n";
  out += "# cp_config=cp_config, ep_config=ep_config, pp_config=pp_config, ac_config=ac_config, ...)";
  if (ctx.job)
    out += ",\n# with rank_microbatch_size=" + Str(static_cast<long long>(l.mbs) * ctx.job->seq_len) +
           " tokens (micro-batch " + Str(l.mbs) + " x seq_len " + Str(ctx.job->seq_len) + ")";
  out += ".\n";
  return out;
}

}  // namespace foldplan
