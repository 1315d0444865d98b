// torchtitan's configuration for a layout, in two forms (doc/trainers.md
// "torchtitan"): `torchtitan`, a Python module whose function returns a
// Trainer.Config (torchtitan after 2026-02-23, read at b5bcd76), and
// `torchtitan-toml`, a [parallelism] TOML table (the releases with TOML
// configs, the last read at 238fa995). One function computes the settings
// (TorchtitanSettings); two writers print them.
//
// Relied on (facts read in torchtitan's sources, doc/trainers.md): its mesh
// is (pp, dp_replicate, dp_shard, cp, tp) row-major, pp outermost; EP is no
// world-size factor but borrows the innermost ranks of dp_shard x cp x tp
// (experts never tensor-parallel with EP; without EP they shard over the TP
// mesh); data parallelism is FSDP2 (dp_shard) or replication; CP is ring
// attention with the headtail load balancer; pipeline_parallel_layers_per_stage
// counts the embedding and the output as a layer each unless
// pipeline_parallel_first/last_stage_less_layers are 0, and
// module_fqns_per_model_part names each virtual stage's modules.
// What torchtitan cannot run is refused by the trainer rules
// (TrainerRefusal, planner/trainer_rules.h) before anything is computed;
// what the writers then cannot express, and torchtitan's groups differing
// from the map's, are bugs in foldplan and reported as such.
#include <algorithm>
#include <cctype>
#include <optional>
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
  return Status::Error("torchtitan cannot express this layout: " + why +
                       " (the trainer rules, planner/trainer_rules.h, should have refused it: a bug in foldplan)");
}

enum class TtCheckpointing { kNone, kSelective, kFull };

// The torchtitan model module and flavor for a foldplan model: `module`
// empty for a model torchtitan has none for (a placeholder is written).
struct TtModel {
  std::string module;        // "deepseek_v3" (torchtitan.models.<module>)
  std::string flavor;        // "671B"
  bool flavor_read = false;  // the flavor name was read in torchtitan (else inferred from foldplan's name)
  std::string name;          // foldplan's model name, "" without a model
  std::string identifier;    // the name as a Python identifier, for the placeholder
  bool moe = true;           // takes moe_comm_backend (unknown without a model: assumed)
};

// Everything both writers print; one computation.
struct TtSettings {
  std::string layout_text;
  int dp_replicate = 1, dp_shard = 1, tp = 1, cp = 1, pp = 1, ep = 1;
  const char* schedule = nullptr;                       // pp > 1
  std::vector<int> stage_layers;                        // decoder layers per virtual stage, model order; empty: unknown
  std::vector<std::vector<std::string>> stage_modules;  // module FQNs per virtual stage (with stage_layers)
  bool even_split = false;
  std::optional<long long> num_pp_microbatches;    // pp > 1, a job whose batch divides
  std::optional<long long> tokens_per_microbatch;  // per data-parallel rank: mbs x seq_len
  int seq_len = 0, mbs = 1;
  long long global_batch = 0;
  const char* comm_backend = "standard";
  std::string dispatcher;  // foldplan's name, for comments
  TtCheckpointing checkpointing = TtCheckpointing::kNone;
  std::string recompute;                // foldplan's name, for comments
  TtModel model;
  int mtp_layers = 0;
  std::vector<std::string> cost_notes;  // TrainerCostNotes
  std::string placement_note;           // PlacementNote, '#' lines
  std::string pipeline_note;            // why no module FQNs (no model), else empty
};

// A name as a Python identifier (letters, digits, '_'; not starting with a digit).
std::string Identifier(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "model_" + out;
  return out;
}

// A name safe inside a Python or TOML string literal and a comment: printable
// ASCII without quotes or backslashes ('_' for the rest).
std::string Printable(const std::string& name) {
  std::string out;
  for (char c : name) out += (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') ? c : '_';
  return out;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// deepseek-v3 -> deepseek_v3 "671B" (read: its config_registry); qwen3-* and
// llama3-* -> qwen3 / llama3 with the size as flavor ("30B-A3B", "70B";
// inferred); anything else has no torchtitan model.
TtModel ModelOf(const ModelSpec* model) {
  TtModel m;
  if (!model) {
    m.identifier = "model";
    return m;
  }
  m.name = Printable(model->name);
  m.identifier = Identifier(model->name);
  m.moe = model->is_moe();
  if (model->name == "deepseek-v3") {
    m.module = "deepseek_v3";
    m.flavor = "671B";
    m.flavor_read = true;
  } else {
    for (const char* prefix : {"qwen3-", "llama3-"}) {
      const std::string p = prefix;
      if (model->name.size() > p.size() && model->name.compare(0, p.size(), p) == 0) {
        m.module = p.substr(0, p.size() - 1);
        m.flavor = Upper(model->name.substr(p.size()));
      }
    }
  }
  return m;
}

const char* CommBackend(Dispatcher d) {
  switch (d) {
    case Dispatcher::kAllToAll:
      return "standard";
    case Dispatcher::kDeepEP:
      return "deepep";
    case Dispatcher::kHybridEP:
      return "hybridep";
    case Dispatcher::kAllGather:
      break;
  }
  return nullptr;
}

// Whether the model has experts; without a model, whether the layout has EP
// (the trainer rules read it so).
bool HasExperts(const Layout& l, const ModelSpec* model) { return model ? model->is_moe() : l.ep > 1; }

// torchtitan's groups for the layout's degrees: dense mesh (pp, dp, cp, tp)
// row-major (dp_replicate 1); its EP borrowing (ep the innermost ranks of
// dp_shard x cp x tp, experts never tensor-parallel; without EP experts
// shard over the TP mesh) gives the same groups as a sparse mesh
// (pp, efsdp, ep, etp) row-major. Expert kinds only for a model with experts.
std::vector<std::pair<GroupKind, Groups>> TorchtitanGroups(const Layout& l, bool experts) {
  const std::vector<int> dense = {l.pp, l.dp, l.cp, l.tp};
  using export_util::RowMajorMeshGroups;
  std::vector<std::pair<GroupKind, Groups>> out = {
      {GroupKind::kTp, RowMajorMeshGroups(dense, {false, false, false, true})},
      {GroupKind::kCp, RowMajorMeshGroups(dense, {false, false, true, false})},
      {GroupKind::kDp, RowMajorMeshGroups(dense, {false, true, false, false})},
      {GroupKind::kDpCp, RowMajorMeshGroups(dense, {false, true, true, false})},
      {GroupKind::kPp, RowMajorMeshGroups(dense, {true, false, false, false})},
  };
  if (experts) {
    const int etp = l.ep == 1 ? l.tp : 1;
    const std::vector<int> sparse = {l.pp, l.world / (l.pp * l.ep * etp), l.ep, etp};
    out.push_back({GroupKind::kEp, RowMajorMeshGroups(sparse, {false, false, true, false})});
    out.push_back({GroupKind::kEtp, RowMajorMeshGroups(sparse, {false, false, false, true})});
    out.push_back({GroupKind::kEdp, RowMajorMeshGroups(sparse, {false, true, false, false})});
  }
  return out;
}

// Module FQNs per virtual stage in model order: "tok_embeddings" first,
// "layers.<i>" for each decoder layer, "norm" and "output" last.
std::vector<std::vector<std::string>> StageModules(const std::vector<int>& stage_layers) {
  std::vector<std::vector<std::string>> out(stage_layers.size());
  int layer = 0;
  for (size_t s = 0; s < stage_layers.size(); ++s) {
    if (s == 0) out[s].push_back("tok_embeddings");
    for (int i = 0; i < stage_layers[s]; ++i) out[s].push_back("layers." + Str(layer++));
    if (s + 1 == stage_layers.size()) {
      out[s].push_back("norm");
      out[s].push_back("output");
    }
  }
  return out;
}

Result<TtSettings> TorchtitanSettings(const RankMap& map, const ExportContext& ctx) {
  const Layout& l = map.layout();
  const TrainerContext tctx{ctx.cluster, ctx.model, ctx.job};
  if (Status refused = TrainerRefusal(Trainer::kTorchtitan, l, tctx); !refused.ok()) return refused;

  // Checks on the trainer rules: what reaches here torchtitan must run.
  if (l.cp > 1 && l.cp_style != CpStyle::kRing)
    return RefuseUnruled("its context parallelism is ring attention only, this layout uses Ulysses CP " + Str(l.cp));
  if (l.dp > 1 && !l.fsdp)
    return RefuseUnruled("its data parallelism is FSDP2 or replication, and this layout costs dp " + Str(l.dp) +
                         " as a ZeRO-1 distributed optimizer (fsdp 0)");
  const bool experts = HasExperts(l, ctx.model);
  if (experts && l.ep > 1 && l.etp != 1)
    return RefuseUnruled("its experts are never tensor-parallel with EP, this layout has etp " + Str(l.etp));
  if (l.a2a_overlap || !l.cuda_graphs.none()) return RefuseUnruled("it has no Megatron EP overlap or CUDA graphs");
  if (l.recompute.selective() && l.recompute != Recompute::Selective())  // a set other than core_attn alone
    return RefuseUnruled("its activation checkpointing names no Megatron modules (recompute " + Name(l.recompute) +
                         ")");
  TtSettings s;
  s.schedule = export_util::TorchPipelineSchedule(l.schedule_or_default());
  if (l.pp > 1 && !s.schedule)
    return RefuseUnruled(export_util::NoTorchScheduleReason(l.schedule_or_default(), "torchtitan"));
  s.comm_backend = CommBackend(l.dispatcher);
  if (!s.comm_backend) return RefuseUnruled(std::string("it has no ") + Name(l.dispatcher) + " dispatcher");
  // Its FP8 converters exist, but the field that takes them was not read:
  // trainer_recipe refuses every precision but bf16.
  if (l.precision != Precision::kBF16) return RefuseUnruled(std::string("it has no ") + Name(l.precision) + " recipe");
  for (const auto& [kind, theirs] : TorchtitanGroups(l, experts)) {
    const std::string mismatch = export_util::DescribeGroupMismatch(Name(kind), map.groups(kind), theirs, "torchtitan");
    if (!mismatch.empty())
      return RefuseUnruled(
          "its mesh (pp, dp_replicate, dp_shard, cp, tp) is row-major with pp outermost and EP "
          "the innermost dp_shard x cp x tp ranks, and this layout's order '" +
          l.order + "' numbers ranks otherwise: " + mismatch);
  }

  s.layout_text = FormatLayout(l);
  s.dp_replicate = 1;  // FSDP2: the layout's dp all on shard (fsdp 1; dp 1 otherwise)
  s.dp_shard = l.dp;
  s.tp = l.tp;
  s.cp = l.cp;
  s.pp = l.pp;
  s.ep = l.ep;
  s.mbs = l.mbs;
  s.dispatcher = Name(l.dispatcher);
  s.recompute = Name(l.recompute);
  s.checkpointing = l.recompute.full()        ? TtCheckpointing::kFull
                    : l.recompute.selective() ? TtCheckpointing::kSelective
                                              : TtCheckpointing::kNone;
  s.model = ModelOf(ctx.model);
  if (ctx.model) s.mtp_layers = ctx.model->mtp_layers;
  if (ctx.job) {
    s.seq_len = ctx.job->seq_len;
    s.global_batch = ctx.job->global_batch;
    s.tokens_per_microbatch = static_cast<long long>(l.mbs) * ctx.job->seq_len;
    const long long per_step = static_cast<long long>(l.dp) * l.mbs;
    if (l.pp > 1 && ctx.job->global_batch % per_step == 0) s.num_pp_microbatches = ctx.job->global_batch / per_step;
  }
  if (l.pp > 1) {
    if (!l.stage_layers.empty()) {
      s.stage_layers = l.stage_layers;
      s.stage_modules = StageModules(l.stage_layers);
      s.even_split =
          std::all_of(l.stage_layers.begin(), l.stage_layers.end(), [&](int n) { return n == l.stage_layers[0]; });
    } else {
      s.pipeline_note =
          "No model: foldplan knows no layer count, so it names no modules per stage; torchtitan "
          "then splits the layers by its own rule (without pipeline_parallel_layers_per_stage, 2 "
          "stages per rank), which is not necessarily this plan's pp " +
          Str(l.pp) + " x vpp " + Str(l.vpp) + " = " + Str(l.pp * l.vpp) + " stages: export with --model.";
    }
  }
  s.cost_notes = TrainerCostNotes(Trainer::kTorchtitan, l, tctx);
  s.placement_note = export_util::PlacementNote(map, "#");
  return s;
}

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

// The virtual stages' module lists, each after a comment line naming it,
// one "[...]," item per stage indented by `indent`, wrapped at about 100
// characters.
std::string StageModuleLines(const TtSettings& s, int indent) {
  std::string out;
  const std::string pad(static_cast<size_t>(indent), ' ');
  for (size_t st = 0; st < s.stage_modules.size(); ++st) {
    out += pad + "# virtual stage " + Str(static_cast<long long>(st)) + ": " + Str(s.stage_layers[st]) +
           " decoder layers\n";
    std::string line = pad + "[";
    bool first = true;
    for (const std::string& fqn : s.stage_modules[st]) {
      const std::string item = (first ? "" : ", ") + Quoted(fqn);
      if (line.size() + item.size() > 98) {
        out += line + ",\n";
        line = pad + " " + Quoted(fqn);
      } else {
        line += item;
      }
      first = false;
    }
    out += line + "],\n";
  }
  return out;
}

// Comment lines both formats open with, after their first line.
std::string CommonComments(const TtSettings& s) {
  std::string out;
  out += "# Its process groups were checked equal to the rank map's (tp, cp, dp, dp_cp, pp and, with\n";
  out += "# experts, ep, etp, edp): mesh (pp, dp_replicate, dp_shard, cp, tp) row-major, EP the innermost\n";
  out += "# dp_shard x cp x tp ranks.\n";
  for (const std::string& note : s.cost_notes) out += export_util::CommentLines("Cost: " + note, "#");
  out += s.placement_note;
  if (!s.pipeline_note.empty()) out += export_util::CommentLines(s.pipeline_note, "#");
  if (s.pp > 1 && !s.stage_layers.empty()) {
    std::string split;
    for (int n : s.stage_layers) split += " " + Str(n);
    out += export_util::CommentLines(
        "Pipeline: " + Str(static_cast<long long>(s.stage_layers.size())) + " virtual stages in model order, " +
            "decoder layers per stage:" + split + "; torchtitan places them on the pp " + Str(s.pp) + " ranks " +
            (std::string(s.schedule) == "DualPipeV" ? "in a V (stage s on rank s, then 2 pp - 1 - s), as DualPipeV runs"
                                                    : "in a loop (stage s on rank s % pp)") +
            ".",
        "#");
    if (s.mtp_layers > 0)
      out += export_util::CommentLines(
          "The plan holds " + Str(s.mtp_layers) +
              " MTP layer(s) that these module names leave out (whether torchtitan's model has MTP modules "
              "was not read).",
          "#");
  }
  return out;
}

std::string Bool(bool b, bool python) { return python ? (b ? "True" : "False") : (b ? "true" : "false"); }

// The [parallelism] / ParallelismConfig settings as (key, value text) in
// writing order; the pipeline keys that differ between the formats are the
// writers'.
std::vector<std::pair<std::string, std::string>> DegreeKeys(const TtSettings& s, bool python) {
  std::vector<std::pair<std::string, std::string>> out = {
      {"data_parallel_replicate_degree", Str(s.dp_replicate)},
      {"data_parallel_shard_degree", Str(s.dp_shard)},
      {"tensor_parallel_degree", Str(s.tp)},
  };
  if (s.tp > 1) out.push_back({"enable_sequence_parallel", Bool(true, python)});
  out.push_back({"context_parallel_degree", Str(s.cp)});
  if (s.cp > 1) out.push_back({"context_parallel_load_balancer", Quoted("headtail")});
  out.push_back({"pipeline_parallel_degree", Str(s.pp)});
  if (s.pp > 1) {
    out.push_back({"pipeline_parallel_schedule", Quoted(s.schedule)});
    if (s.num_pp_microbatches) out.push_back({"num_pp_microbatches", Str(*s.num_pp_microbatches)});
  }
  return out;
}

// A comment on the step's batch, shared by both formats.
std::string BatchComment(const TtSettings& s) {
  if (!s.tokens_per_microbatch) return "# No job: sequence length and batch not exported.\n";
  const long long dp = static_cast<long long>(s.dp_replicate) * s.dp_shard;
  std::string text = "Batch: micro-batch " + Str(s.mbs) + " x seq_len " + Str(s.seq_len) + " = " +
                     Str(*s.tokens_per_microbatch) +
                     " tokens per data-parallel rank (a CP group reads one micro-batch and splits its "
                     "sequences); global batch " +
                     Str(s.global_batch) + " sequences";
  if (s.global_batch % (dp * s.mbs) == 0)
    text +=
        " = " + Str(s.global_batch / (dp * s.mbs)) + " micro-batches per step on each of the dp " + Str(dp) + " ranks.";
  else
    text += ", which does not divide by dp " + Str(dp) + " x mbs " + Str(s.mbs) +
            (s.pp > 1 ? ": num_pp_microbatches is not set." : ".");
  return export_util::CommentLines(text, "#");
}

}  // namespace

Result<std::string> ExportTorchtitan(const RankMap& map, const ExportContext& ctx) {
  Result<TtSettings> settings = TorchtitanSettings(map, ctx);
  if (!settings.ok()) return settings.status();
  const TtSettings& s = *settings;
  const std::string model_id = s.model.identifier;

  std::string out = "# torchtitan config for " + s.layout_text + " (foldplan export).\n";
  out += "# For torchtitan after 2026-02-23 (Python configs), read at b5bcd76; releases with TOML\n";
  out += "# configs: --format torchtitan-toml. Run with --module <this module> --config foldplan_config.\n";
  out += CommonComments(s);
  out += BatchComment(s);
  out += "\n";
  out += "from torchtitan.config import ParallelismConfig, TrainingConfig\n";
  if (s.checkpointing == TtCheckpointing::kFull)
    out += "from torchtitan.distributed.activation_checkpoint import FullAC\n";
  else if (s.checkpointing == TtCheckpointing::kSelective)
    out += "from torchtitan.distributed.activation_checkpoint import SelectiveAC\n";
  out += "from torchtitan.trainer import Trainer\n";
  if (!s.model.module.empty()) {
    out += "from torchtitan.models." + s.model.module + " import model_registry\n";
  } else {
    out += "\n# PLACEHOLDER: ";
    out += s.model.name.empty()
               ? "no --model was given, so no torchtitan model is named.\n"
               : "torchtitan ships no " + s.model.name +
                     " model (foldplan maps deepseek-v3, qwen3-* and llama3-* to\n# torchtitan's deepseek_v3, "
                     "qwen3 and llama3). Replace this import with a model registry of your own.\n";
    out += "from your_models." + model_id + " import model_registry  # PLACEHOLDER\n";
  }
  out += "\n\ndef foldplan_config() -> Trainer.Config:\n";
  // The model.
  std::string flavor = s.model.module.empty() ? (s.model.name.empty() ? "model" : s.model.name) : s.model.flavor;
  if (!s.model.module.empty() && !s.model.flavor_read)
    out += "    # Flavor \"" + flavor + "\" inferred from foldplan's model name " + s.model.name +
           " (not read in torchtitan).\n";
  if (s.model.moe)
    out += "    # moe_comm_backend " + std::string(s.comm_backend) + ": the plan's dispatcher " + s.dispatcher + ".\n";
  std::string model_call = "model_registry(" + Quoted(flavor);
  if (s.model.moe) model_call += ", moe_comm_backend=" + Quoted(s.comm_backend);
  model_call += ")";

  out += "    return Trainer.Config(\n";
  out += "        model_spec=" + model_call + "," + (s.model.module.empty() ? "  # PLACEHOLDER" : "") + "\n";
  if (s.tokens_per_microbatch) {
    out += "        training=TrainingConfig(\n";
    out += "            num_tokens_per_microbatch_per_dp_rank=" + Str(*s.tokens_per_microbatch) + ",  # mbs " +
           Str(s.mbs) + " x seq_len " + Str(s.seq_len) + "\n";
    out += "            max_context_length=" + Str(s.seq_len) + ",\n";
    out += "        ),\n";
  }
  out += "        parallelism=ParallelismConfig(\n";
  for (const auto& [key, value] : DegreeKeys(s, /*python=*/true)) out += "            " + key + "=" + value + ",\n";
  if (s.pp > 1 && !s.stage_modules.empty()) {
    out += "            # The stages hold exactly the modules below: no layer counted for the\n";
    out += "            # embedding or the output.\n";
    out += "            pipeline_parallel_first_stage_less_layers=0,\n";
    out += "            pipeline_parallel_last_stage_less_layers=0,\n";
    out += "            module_fqns_per_model_part=[\n";
    out += StageModuleLines(s, 16);
    out += "            ],\n";
  }
  out += "            expert_parallel_degree=" + Str(s.ep) + ",\n";
  out += "        ),\n";
  switch (s.checkpointing) {
    case TtCheckpointing::kNone:
      out += "        activation_checkpoint=None,  # recompute none\n";
      break;
    case TtCheckpointing::kFull:
      out += "        activation_checkpoint=FullAC.Config(),  # recompute full: every block\n";
      break;
    case TtCheckpointing::kSelective:
      out += "        # Recompute " + s.recompute + " (Megatron's modules); torchtitan's selective AC picks ops\n";
      out += "        # by its own policy, the closest it has.\n";
      out += "        activation_checkpoint=SelectiveAC.Config(),\n";
      break;
  }
  out += "    )\n";

  // The same parallelism as command-line overrides.
  out += "\n\n# The same parallelism as command-line overrides (--parallelism.* flags are still accepted\n";
  out += "# and override the config; the value spelling is inferred):\n";
  for (const auto& [key, value] : DegreeKeys(s, /*python=*/true)) {
    std::string v = value;
    if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
    out += "#   --parallelism." + key + " " + v + "\n";
  }
  if (s.pp > 1 && !s.stage_modules.empty()) {
    out += "#   --parallelism.pipeline_parallel_first_stage_less_layers 0\n";
    out += "#   --parallelism.pipeline_parallel_last_stage_less_layers 0\n";
  }
  out += "#   --parallelism.expert_parallel_degree " + Str(s.ep) + "\n";
  if (s.pp > 1 && !s.stage_modules.empty())
    out += "# module_fqns_per_model_part (a list of lists) stays in the config: no flag spelling was read.\n";
  return out;
}

Result<std::string> ExportTorchtitanToml(const RankMap& map, const ExportContext& ctx) {
  Result<TtSettings> settings = TorchtitanSettings(map, ctx);
  if (!settings.ok()) return settings.status();
  const TtSettings& s = *settings;

  std::string out = "# torchtitan TOML settings for " + s.layout_text + " (foldplan export).\n";
  out += "# For the torchtitan releases with TOML configs, before 2026-02-23 (the last read at 238fa995);\n";
  out += "# current torchtitan takes a Python config: --format torchtitan. The [parallelism] keys are\n";
  out += "# ParallelismConfig's as read at b5bcd76 plus expert_parallel_comm_backend (238fa995); that\n";
  out += "# 238fa995 has each of them, beyond its pipeline keys, is inferred.\n";
  out += CommonComments(s);
  out += BatchComment(s);
  std::string ac = "Activation checkpointing: ";
  switch (s.checkpointing) {
    case TtCheckpointing::kNone:
      ac += "none";
      break;
    case TtCheckpointing::kFull:
      ac += "full (every block)";
      break;
    case TtCheckpointing::kSelective:
      ac += "selective (torchtitan's own op policy for foldplan's " + s.recompute + ")";
      break;
  }
  out += export_util::CommentLines(
      ac + "; set it in your release's [activation_checkpoint] table (its keys were not read at 238fa995).", "#");
  out += "\n[parallelism]\n";
  for (const auto& [key, value] : DegreeKeys(s, /*python=*/false)) out += key + " = " + value + "\n";
  if (s.pp > 1 && !s.stage_modules.empty()) {
    if (s.even_split) {
      out += "# Even split: every virtual stage holds this many decoder layers, no layer counted for the\n";
      out += "# embedding or the output.\n";
      out += "pipeline_parallel_layers_per_stage = " + Str(s.stage_layers[0]) + "\n";
      out += "pipeline_parallel_first_stage_less_layers = 0\n";
      out += "pipeline_parallel_last_stage_less_layers = 0\n";
    } else {
      out += "# Uneven split: the modules of each virtual stage, in model order.\n";
      out += "module_fqns_per_model_part = [\n";
      out += StageModuleLines(s, 2);
      out += "]\n";
    }
  }
  out += "expert_parallel_degree = " + Str(s.ep) + "\n";
  if (s.model.moe) out += "expert_parallel_comm_backend = " + Quoted(s.comm_backend) + "\n";
  return out;
}

}  // namespace foldplan
