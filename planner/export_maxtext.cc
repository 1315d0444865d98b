// MaxText's settings as a YAML fragment: ici_*_parallelism and
// dcn_*_parallelism for data, pipeline (its "stage" axis), fsdp, context,
// tensor and expert, whose per-axis products give the layout; with pp > 1
// pipeline_parallel_layers (and the layers per stage); with cp > 1
// context_parallel_strategy; with a job the batch and sequence length.
//
// Relied on (doc/trainers.md "maxtext", facts read at MaxText e591f30c):
// MaxText builds one mesh over its axes in a fixed order, slowest first
// data, stage, fsdp, ..., context, ..., tensor, ..., expert (the other axes
// left at 1); the dense layers shard the batch over data, fsdp and expert,
// the experts over expert and their hidden dim over tensor. So dp = data x
// fsdp x ep and etp = tp. Its types.py forbids unknown keys. It pipelines
// one kind of decoder layer, pipeline_parallel_layers of them, which must
// divide over the stages (for DeepSeek the default is the MoE layers only).
// What MaxText cannot run is refused by the trainer rules (TrainerRefusal,
// planner/trainer_rules.h) before anything is written; the mesh's groups
// and its ICI x DCN split are then checked against the map as a check on
// those rules (a difference there is a bug in foldplan).
#include <algorithm>
#include <charconv>
#include <numeric>
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
  return Status::Error("maxtext cannot express this layout: " + why +
                       " (the trainer rules, planner/trainer_rules.h, should have refused it: a bug in foldplan)");
}

constexpr const char* kKeys[export_util::kMaxTextAxisCount] = {"data",    "pipeline", "fsdp",
                                                              "context", "tensor",   "expert"};

std::vector<bool> Mask(std::initializer_list<export_util::MaxTextAxis> axes) {
  std::vector<bool> v(export_util::kMaxTextAxisCount, false);
  for (export_util::MaxTextAxis a : axes) v[a] = true;
  return v;
}

// The shortest decimal that reads back as `v`.
std::string Decimal(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// Whether MaxText's one pipelined layer kind covers every decoder layer.
bool LayersAlike(const ModelSpec& m) { return !m.is_moe() || m.moe_layer_count() == m.layers; }

}  // namespace

Result<std::string> ExportMaxText(const RankMap& map, const ExportContext& ctx) {
  using namespace export_util;
  const Layout& l = map.layout();
  const TrainerContext tctx{ctx.cluster, ctx.model, ctx.job};
  if (Status refused = TrainerRefusal(Trainer::kMaxText, l, tctx); !refused.ok()) return refused;

  // Checks on the trainer rules: what reaches here MaxText must build.
  if (l.etp != l.tp)
    return RefuseUnruled("MaxText shards the experts' hidden dim over its tensor axis, so etp must equal tp " +
                         Str(l.tp) + "; this layout has etp " + Str(l.etp));
  const std::vector<int> shape = MaxTextMeshShape(l);
  if (shape.empty())
    return RefuseUnruled("its expert axis is a batch axis of the dense layers, so ep " + Str(l.ep) +
                         " must divide dp " + Str(l.dp));
  const std::string mismatch = MeshGroupMismatch(
      map, shape,
      {{GroupKind::kTp, Mask({kMaxTextTensor})},
       {GroupKind::kCp, Mask({kMaxTextContext})},
       {GroupKind::kDp, Mask({kMaxTextData, kMaxTextFsdp, kMaxTextExpert})},
       {GroupKind::kDpCp, Mask({kMaxTextData, kMaxTextFsdp, kMaxTextContext, kMaxTextExpert})},
       {GroupKind::kPp, Mask({kMaxTextStage})},
       {GroupKind::kEp, Mask({kMaxTextExpert})},
       {GroupKind::kEtp, Mask({kMaxTextTensor})},
       {GroupKind::kEdp, Mask({kMaxTextData, kMaxTextFsdp, kMaxTextContext})}},
      "MaxText");
  if (!mismatch.empty())
    return RefuseUnruled("its mesh orders axes data, stage, fsdp, context, tensor, expert (slowest first; data "
                         "outside stage, expert innermost), this layout's order '" + l.order +
                         "' numbers ranks otherwise: " + mismatch);
  auto split = SplitIciDcn(map, shape);
  if (!split.ok())
    return RefuseUnruled("create_hybrid_device_mesh puts whole granules of consecutive devices in each NVLink "
                         "domain, and " + split.status().message());
  const IciDcnSplit& s = split.value();
  // The pipeline: one layer kind, split evenly.
  const bool even = std::all_of(l.stage_layers.begin(), l.stage_layers.end(),
                                [&l](int n) { return n == l.stage_layers[0]; });
  int pipeline_layers = 0;  // 0: unknown (no model, no split)
  if (l.pp > 1) {
    if (ctx.model && !LayersAlike(*ctx.model))
      return RefuseUnruled("MaxText pipelines one kind of decoder layer, and " + ctx.model->name + " has " +
                           Str(ctx.model->moe_layer_count()) + " MoE layers of " + Str(ctx.model->layers));
    if (!even) return RefuseUnruled("MaxText's stages hold equal layer counts, and this layout's split is uneven");
    pipeline_layers = ctx.model ? ctx.model->layers
                                : std::accumulate(l.stage_layers.begin(), l.stage_layers.end(), 0);
    if (pipeline_layers > 0 && pipeline_layers % (l.pp * l.vpp) != 0)
      return RefuseUnruled("pipeline_parallel_layers " + Str(pipeline_layers) + " do not divide over pp x vpp " +
                           Str(l.pp * l.vpp));
  }

  const bool on_data = shape[kMaxTextData] > 1 || (shape[kMaxTextFsdp] == 1 && !l.fsdp);
  const int rest = l.dp / l.ep;
  std::string out = "# MaxText settings for " + FormatLayout(l) + " (foldplan export).\n";
  out += "# Mesh (data, stage, fsdp, context, tensor, expert), row-major: its groups were checked equal to\n";
  out += "# the rank map's (tp, cp, dp, dp_cp, pp, ep, etp, edp).\n";
  // What the axes do to the weights, against what the plan was costed as.
  std::string weights = "dp " + Str(l.dp) + " = " + (on_data ? "data " : "fsdp ") + Str(rest) + " x expert " +
                        Str(l.ep) + " (MaxText's expert axis is a batch axis of the dense layers). Its fsdp axis "
                        "shards weights, gradients and optimizer state, its data axis replicates them";
  if (rest == 1) {
    weights += ".";
  } else {
    weights += ": dp / ep " + Str(rest) + " is on " + (on_data ? "data" : "fsdp");
    if (on_data == l.fsdp)  // not the layout's own choice: the order's groups need the other axis
      weights += on_data ? " (the order needs it: dp comes after pp, and data is outside stage)"
                         : " (the order needs it: dp comes before pp, and fsdp is inside stage)";
    weights += ".";
  }
  weights += l.fsdp ? " foldplan costed fsdp: weights, gradients and optimizer state sharded over dp " + Str(l.dp) + "."
                    : " foldplan costed Megatron's distributed optimizer: weights and gradients replicated over dp " +
                          Str(l.dp) + ", optimizer state sharded.";
  out += CommentLines(weights, "#");
  out += "# ICI: inside an NVLink domain of " + Str(s.granule_ranks) + " ranks; DCN: across " + Str(s.granules) +
         (s.granules == 1 ? " domain" : " domains") + ". Other mesh axes stay at 1.\n";
  for (const std::string& note : TrainerCostNotes(Trainer::kMaxText, l, tctx))
    out += CommentLines("Cost: " + note, "#");
  const std::string placement_note = PlacementNote(map, "#");
  out += placement_note;
  if (!placement_note.empty() && map.idle_gpus() > 0)
    out += "# MaxText meshes every device JAX sees: expose only the rank map's GPUs to it (e.g.\n"
           "# CUDA_VISIBLE_DEVICES per node), so that the idle ones stay out of the mesh.\n";
  for (int a = 0; a < kMaxTextAxisCount; ++a) out += "ici_" + std::string(kKeys[a]) + "_parallelism: " + Str(s.ici[a]) + "\n";
  for (int a = 0; a < kMaxTextAxisCount; ++a) out += "dcn_" + std::string(kKeys[a]) + "_parallelism: " + Str(s.dcn[a]) + "\n";
  if (l.cp > 1)
    out += l.cp_style == CpStyle::kRing
               ? "context_parallel_strategy: ring  # the plan's ring attention (K/V passed around the cp group)\n"
               : "context_parallel_strategy: ulysses  # the plan's Ulysses all-to-all over heads\n";
  if (l.pp > 1) {
    if (pipeline_layers > 0) {
      out += "pipeline_parallel_layers: " + Str(pipeline_layers) + "  # every decoder layer, " +
             Str(pipeline_layers / (l.pp * l.vpp)) + " per virtual stage\n";
      out += "num_layers_per_pipeline_stage: " + Str(pipeline_layers / (l.pp * l.vpp)) + "\n";
    } else {
      out += "# pipeline_parallel_layers: not written (no model and no stage split given): set it to the\n"
             "# decoder layers, which must divide over the " + Str(l.pp * l.vpp) + " virtual stages.\n";
    }
    if (l.vpp > 1)
      out += CommentLines("vpp " + Str(l.vpp) + ": foldplan's " + Str(l.vpp) +
                              " virtual stages per rank are MaxText's repeats of the circular pipeline "
                              "(pipeline_parallel_layers / (stages x layers per stage), inferred); "
                              "num_pipeline_repeats is not among the keys foldplan's notes confirm, so it is "
                              "not written.",
                          "#");
  }
  if (ctx.job) {
    const long long global = ctx.job->global_batch;
    const long long w = l.world;
    // MaxText's global batch = per_device_batch_size x devices, every device
    // counted whatever its axis (inferred): so G / W.
    std::string derivation = "per_device_batch_size: MaxText counts its global batch as per_device_batch_size x "
                             "devices, every device whatever its axis (inferred). foldplan's step is " +
                             Str(global) + " sequences";
    if (global % (static_cast<long long>(l.mbs) * l.dp) == 0)
      derivation += " = mbs " + Str(l.mbs) + " x dp " + Str(l.dp) + " x " + Str(global / (l.mbs * l.dp)) +
                    " micro-batches";
    derivation += ", over W " + Str(w) + " = dp x cp x tp x pp devices: " + Str(global) + " / " + Str(w) + ".";
    out += CommentLines(derivation, "#");
    out += "per_device_batch_size: " + (global % w == 0 ? Str(global / w) : Decimal(static_cast<double>(global) / w)) +
           "\n";
    out += "max_target_length: " + Str(ctx.job->seq_len) + "  # the job's seq_len\n";
  }
  return out;
}

}  // namespace foldplan
