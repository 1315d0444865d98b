// MaxText's mesh settings as a YAML fragment: ici_*_parallelism and
// dcn_*_parallelism for data, pipeline (its "stage" axis), fsdp, context,
// tensor and expert, whose per-axis products give the layout.
//
// Relied on (doc/rankmap.md "maxtext"): MaxText builds one mesh with
// create_hybrid_device_mesh over its axes in a fixed order, slowest first
// data, stage, fsdp, ..., context, ..., tensor, ..., expert (the other axes
// left at 1); the dense layers shard the batch over data, fsdp and expert,
// the experts over expert and their hidden dim over tensor. So dp = data x
// fsdp x ep, etp = tp, and the expert axis holds no context rank. foldplan's
// dp goes to fsdp when the layout shards with FSDP, else to data. The
// groups of that mesh are compared with the map's, and the ICI x DCN split
// is the placement's (ICI inside an NVLink domain); what does not fit is a
// refusal naming the reason.
#include <algorithm>
#include <string>
#include <vector>

#include "planner/export_util.h"
#include "planner/rank_export.h"

namespace foldplan {
namespace {

std::string Str(long long v) { return std::to_string(v); }

Status Refuse(const std::string& why) { return Status::Error("maxtext cannot express this layout: " + why); }

enum MaxTextAxis { kData, kStage, kFsdp, kContext, kTensor, kExpert, kMaxTextAxes };
constexpr const char* kKeys[kMaxTextAxes] = {"data", "pipeline", "fsdp", "context", "tensor", "expert"};

std::vector<bool> Mask(std::initializer_list<MaxTextAxis> axes) {
  std::vector<bool> v(kMaxTextAxes, false);
  for (MaxTextAxis a : axes) v[a] = true;
  return v;
}

}  // namespace

Result<std::string> ExportMaxText(const RankMap& map, const ExportContext& ctx) {
  const Layout& l = map.layout();
  if (l.etp != l.tp)
    return Refuse("MaxText shards the experts' hidden dim over its tensor axis, the attention heads' axis, so "
                  "etp must equal tp " + Str(l.tp) + "; this layout has etp " + Str(l.etp));
  if (l.dp % l.ep != 0)
    return Refuse("its expert axis also shards the dense layers' batch (with data and fsdp), so ep " + Str(l.ep) +
                  " must divide dp " + Str(l.dp) + "; this layout's ep folds over cp or tp instead");
  std::vector<int> shape(kMaxTextAxes, 1);
  shape[kStage] = l.pp;
  shape[l.fsdp ? kFsdp : kData] = l.dp / l.ep;
  shape[kContext] = l.cp;
  shape[kTensor] = l.tp;
  shape[kExpert] = l.ep;
  const std::string mismatch = export_util::MeshGroupMismatch(
      map, shape,
      {{GroupKind::kTp, Mask({kTensor})},
       {GroupKind::kCp, Mask({kContext})},
       {GroupKind::kDp, Mask({kData, kFsdp, kExpert})},
       {GroupKind::kDpCp, Mask({kData, kFsdp, kContext, kExpert})},
       {GroupKind::kPp, Mask({kStage})},
       {GroupKind::kEp, Mask({kExpert})},
       {GroupKind::kEtp, Mask({kTensor})},
       {GroupKind::kEdp, Mask({kData, kFsdp, kContext})}},
      "MaxText");
  if (!mismatch.empty())
    return Refuse("its mesh orders axes data, stage, fsdp, context, tensor, expert (slowest first; data outside "
                  "stage, expert innermost), this layout's order '" + l.order + "' numbers ranks otherwise: " +
                  mismatch);
  auto split = export_util::SplitIciDcn(map, shape);
  if (!split.ok())
    return Refuse("create_hybrid_device_mesh puts whole granules of consecutive devices in each NVLink domain, "
                  "and " + split.status().message());
  const export_util::IciDcnSplit& s = split.value();

  std::string out = "# MaxText mesh settings for " + FormatLayout(l) + " (foldplan export).\n";
  out += "# Mesh (data, stage, fsdp, context, tensor, expert), row-major: its groups were checked equal to\n";
  out += "# the rank map's (tp, cp, dp, dp_cp, pp, ep, etp, edp). dp " + Str(l.dp) + " = " +
         (l.fsdp ? "fsdp " : "data ") + Str(l.dp / l.ep) + " x expert " + Str(l.ep) +
         " (MaxText's expert axis is a batch axis of the dense layers).\n";
  out += "# ICI: inside an NVLink domain of " + Str(s.granule_ranks) + " ranks; DCN: across " + Str(s.granules) +
         (s.granules == 1 ? " domain" : " domains") + ". Other mesh axes stay at 1.\n";
  const std::string placement_note = export_util::PlacementNote(map, "#");
  out += placement_note;
  if (!placement_note.empty() && map.idle_gpus() > 0)
    out += "# MaxText meshes every device JAX sees: expose only the rank map's GPUs to it (e.g.\n"
           "# CUDA_VISIBLE_DEVICES per node), so that the idle ones stay out of the mesh.\n";
  if (l.cp > 1)
    out += l.cp_style == CpStyle::kRing
               ? "# Context parallelism: ring attention (set your MaxText's ring strategy where it has one).\n"
               : "# Context parallelism: foldplan costed Ulysses all-to-all; MaxText's context axis gathers K/V\n"
                 "# instead, so its communication differs from the plan's.\n";
  for (int a = 0; a < kMaxTextAxes; ++a) out += "ici_" + std::string(kKeys[a]) + "_parallelism: " + Str(s.ici[a]) + "\n";
  for (int a = 0; a < kMaxTextAxes; ++a) out += "dcn_" + std::string(kKeys[a]) + "_parallelism: " + Str(s.dcn[a]) + "\n";
  if (l.pp > 1) {
    out += "# Pipeline: MaxText runs its own circular schedule over the stages, not foldplan's " +
           std::string(Name(l.schedule_or_default())) + ".\n";
    const bool even = !l.stage_layers.empty() &&
                      std::all_of(l.stage_layers.begin(), l.stage_layers.end(),
                                  [&l](int n) { return n == l.stage_layers[0]; });
    if (even) {
      out += "num_layers_per_pipeline_stage: " + Str(l.stage_layers[0]) + "  # " + Str(l.vpp) +
             " repeat(s) of the stages = vpp\n";
    } else if (!l.stage_layers.empty()) {
      out += "# foldplan's split is uneven (";
      for (size_t i = 0; i < l.stage_layers.size(); ++i) out += (i ? " " : "") + Str(l.stage_layers[i]);
      out += "); MaxText stages hold equal layer counts.\n";
    }
  }
  if (ctx.job)
    out += "max_target_length: " + Str(ctx.job->seq_len) + "  # the job's seq_len; global batch " +
           Str(ctx.job->global_batch) + " sequences over dp " + Str(l.dp) + "\n";
  return out;
}

}  // namespace foldplan
