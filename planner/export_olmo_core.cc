// OLMo-core's parallelism configs (olmo_core.train.train_module.transformer
// .config), as a Python snippet that imports and builds them: data parallel
// (HSDP with shard degree ep for a layout with ep > 1, else fsdp for
// foldplan's fsdp and ddp without), tensor, context (Ulysses, or ring with
// the zig-zag load balancer, Megatron's split of a sequence into 2*CP
// chunks), expert, pipeline (PipelineScheduleType and split points) and
// activation checkpointing (full, or selected_modules with OLMo-core's
// module names for foldplan's recompute modules).
//
// Relied on (doc/trainers.md "olmo-core", facts read at OLMo-core fa6c5014):
// build_world_mesh builds one mesh, slowest first pp, dp (for HSDP
// dp_replicate then dp_shard), cp, tp; expert parallelism needs HSDP and is
// its dp_shard dimension (shard_degree = ep), so the expert groups are the
// dp_shard groups and the expert data-parallel groups the dp_replicate ones;
// EP is refused with TP. What OLMo-core cannot run is refused by the trainer
// rules (TrainerRefusal, planner/trainer_rules.h) before anything is
// written; the groups of that mesh are then compared with the map's as a
// check on those rules (a difference there is a bug in foldplan).
#include <string>
#include <vector>

#include "planner/export_util.h"
#include "planner/rank_export.h"
#include "planner/trainer_rules.h"

namespace foldplan {
namespace {

std::string Str(long long v) { return std::to_string(v); }

// What the trainer rules should have refused: a bug in foldplan if reached.
Status RefuseUnruled(const std::string& why) {
  return Status::Error("olmo-core cannot express this layout: " + why +
                       " (the trainer rules, planner/trainer_rules.h, should have refused it: a bug in foldplan)");
}

// The groups of OLMo-core's world mesh, slowest first (pp, dp_replicate,
// dp_shard, cp, tp) with dp_replicate = dp / ep and dp_shard = ep when
// `hsdp` (ep > 1), else (pp, 1, dp, cp, tp). With HSDP the expert groups
// are the dp_shard groups and the expert data-parallel groups dp_replicate;
// experts are never tensor-parallel. Without EP nothing is compared for the
// expert view (OLMo-core builds no expert groups).
std::vector<std::pair<GroupKind, Groups>> OlmoCoreGroups(const Layout& l, bool hsdp) {
  const int replicas = hsdp ? l.dp / l.ep : 1;
  const std::vector<int> mesh = {l.pp, replicas, l.dp / replicas, l.cp, l.tp};
  using export_util::RowMajorMeshGroups;
  std::vector<std::pair<GroupKind, Groups>> out = {
      {GroupKind::kTp, RowMajorMeshGroups(mesh, {false, false, false, false, true})},
      {GroupKind::kCp, RowMajorMeshGroups(mesh, {false, false, false, true, false})},
      {GroupKind::kDp, RowMajorMeshGroups(mesh, {false, true, true, false, false})},
      {GroupKind::kDpCp, RowMajorMeshGroups(mesh, {false, true, true, true, false})},
      {GroupKind::kPp, RowMajorMeshGroups(mesh, {true, false, false, false, false})},
  };
  if (hsdp) {
    out.push_back({GroupKind::kEp, RowMajorMeshGroups(mesh, {false, false, true, false, false})});
    out.push_back({GroupKind::kEdp, RowMajorMeshGroups(mesh, {false, true, false, false, false})});
    out.push_back({GroupKind::kEtp, RowMajorMeshGroups(mesh, {false, false, false, false, false})});
  }
  return out;
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
  const TrainerContext tctx{ctx.cluster, ctx.model, ctx.job};
  if (Status refused = TrainerRefusal(Trainer::kOlmoCore, l, tctx); !refused.ok()) return refused;

  // Checks on the trainer rules: what reaches here OLMo-core must build.
  const char* schedule = OlmoSchedule(l.schedule_or_default());
  if (l.pp > 1 && !schedule)
    return RefuseUnruled(std::string("PipelineScheduleType has no ") + Name(l.schedule_or_default()));
  const bool hsdp = l.ep > 1;  // OLMo-core's EP is HSDP's shard dimension
  if (hsdp && l.dp % l.ep != 0)
    return RefuseUnruled("HSDP's shard degree is ep " + Str(l.ep) + ", which must divide dp " + Str(l.dp));
  if (hsdp && !l.fsdp)
    return RefuseUnruled("ep " + Str(l.ep) + " needs HSDP, which shards like FSDP, and this layout has fsdp 0");
  const char* mesh_text = hsdp ? "(pp, dp_replicate, dp_shard, cp, tp)" : "(pp, dp, cp, tp)";
  for (const auto& [kind, theirs] : OlmoCoreGroups(l, hsdp)) {
    const std::string mismatch =
        export_util::DescribeGroupMismatch(Name(kind), map.groups(kind), theirs, "OLMo-core");
    if (!mismatch.empty())
      return RefuseUnruled(std::string("its world mesh ") + mesh_text + " is row-major with pp outermost" +
                           (hsdp ? " and the expert groups are its dp_shard groups" : "") +
                           ", and this layout's order '" + l.order + "' numbers ranks otherwise: " + mismatch);
  }

  std::string out = "# OLMo-core parallelism for " + FormatLayout(l) + " (foldplan export).\n";
  out += std::string("# Its world mesh ") + mesh_text + ", row-major, slowest first, was checked to give the\n";
  out += hsdp ? "# rank map's tp, cp, dp, dp_cp and pp groups, and its dp_shard (dp_replicate) groups the ep (edp)\n"
                "# groups.\n"
              : "# rank map's tp, cp, dp, dp_cp and pp groups.\n";
  for (const std::string& note : TrainerCostNotes(Trainer::kOlmoCore, l, tctx))
    out += export_util::CommentLines("Cost: " + note, "#");
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

  if (hsdp) {
    out += "# HSDP: OLMo-core's expert parallelism is HSDP's shard dimension (shard_degree = ep " + Str(l.ep) +
           "):\n# parameters, gradients and optimizer state are sharded over the " + Str(l.ep) +
           " ranks of a dp_shard group and\n# replicated over num_replicas " + Str(l.dp / l.ep) +
           " (foldplan costed fsdp: sharded over all of dp " + Str(l.dp) + ").\n";
    out += "dp_config = TransformerDataParallelConfig(\n    name=DataParallelType.hsdp, num_replicas=" +
           Str(l.dp / l.ep) + ", shard_degree=" + Str(l.ep) + ")\n";
  } else if (l.fsdp) {
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
    out += "  # over dp_shard";
    if (ctx.model && ctx.model->is_moe() && ctx.model->moe->experts % l.ep == 0)
      out += ", " + Str(ctx.model->moe->experts / l.ep) + " local experts";
    out += "; ep_dp " + Str(l.edp) + " = num_replicas\n";
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
