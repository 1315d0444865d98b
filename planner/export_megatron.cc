// Megatron-LM command-line arguments for a layout. Megatron numbers ranks
// with one of two orders only (tp-cp-ep-dp-pp, or tp-cp-ep-pp-dp with
// --use-tp-pp-dp-mapping); a layout is exported when its groups equal the
// groups of one of them (size-1 axes may sit anywhere in the order).
// Megatron's flags and rules as read in its sources at d98e8a64
// (/work/shared/reference/trainers.md, doc/trainers.md "megatron"); its own
// validation rules are refused through TrainerRefusal.
#include <cstdio>
#include <string>
#include <vector>

#include "planner/export_util.h"
#include "planner/launch_files.h"
#include "planner/rank_export.h"
#include "planner/pipeline.h"
#include "planner/pipeline_layout.h"
#include "planner/rank_generator.h"
#include "planner/trainer_rules.h"

namespace foldplan {
namespace {

std::string Str(long long v) { return std::to_string(v); }

// Which Megatron order reproduces the map's groups: kDefaultOrder,
// kPpDpOrder, or "" for neither (then *why says how the default differs).
// Prefers the layout's own spelling when both match (pp == 1, or dp == edp == 1).
std::string MatchingMegatronOrder(const RankMap& map, std::string* why) {
  std::vector<std::string> candidates = {kDefaultOrder, kPpDpOrder};
  if (map.layout().order == kPpDpOrder) std::swap(candidates[0], candidates[1]);
  for (const std::string& order : candidates) {
    Layout megatron = map.layout();
    megatron.order = order;
    Result<GroupSet> theirs = BuildFoldedGroups(megatron);
    if (!theirs.ok()) {
      if (order == kDefaultOrder) *why = theirs.status().message();
      continue;
    }
    bool same = true;
    for (int k = 0; k < kGroupKindCount && same; ++k) {
      const auto kind = static_cast<GroupKind>(k);
      // The embedding groups follow from the pp groups and the model
      // (RankMapOptions), not from the order.
      if (kind == GroupKind::kEmbedding || kind == GroupKind::kPositionEmbedding) continue;
      const Groups& ours = map.groups(kind);
      if (ours == (*theirs)[k]) continue;
      same = false;
      if (order == kDefaultOrder)
        *why = export_util::DescribeGroupMismatch(Name(kind), ours, (*theirs)[k], order);
    }
    if (same) return order;
  }
  return "";
}

bool AllEqual(const std::vector<int>& v, size_t begin, size_t end) {
  for (size_t i = begin + 1; i < end; ++i)
    if (v[i] != v[begin]) return false;
  return true;
}

// Arguments placing the decoder (and MTP) layers on stages. The pipeline
// description (planner/pipeline.h) says what each virtual stage holds; an
// explicit layout is needed when the chunks are uneven, when a layout was
// given, or when MTP layers sit elsewhere than the last stage.
Result<std::vector<std::string>> PipelineArgs(const Layout& l, const ModelSpec* model) {
  std::vector<std::string> args;
  if (l.pp == 1) return args;
  const std::vector<int>& stages = l.stage_layers;
  if (!stages.empty() && static_cast<int>(stages.size()) != l.pp * l.vpp)
    return Status::Error("megatron: stage_layers has " + Str(stages.size()) +
                         " entries, expected pp*vpp = " + Str(l.pp * l.vpp));
  const bool even = stages.empty() || AllEqual(stages, 0, stages.size());
  const bool mtp_moved = !l.stage_mtp.empty() && model &&
                         (l.stage_mtp.back() != model->mtp_layers);
  // Without a model the layout holds the stages' layers and no MTP layer.
  auto layout_arg = [&] {
    const std::string text =
        model ? DescribePipeline(l, *model).LayoutText() : FormatPipelineLayout(stages, l.stage_mtp);
    return "--pipeline-model-parallel-layout \"" + text + "\"";
  };
  if (l.pp_layout_given || mtp_moved || (!even && l.vpp > 1)) {
    args.push_back(layout_arg());
    return args;
  }
  if (l.vpp > 1) {
    int per_chunk = stages.empty() ? 0 : stages[0];
    if (stages.empty() && model && model->layers % (l.pp * l.vpp) == 0)
      per_chunk = model->layers / (l.pp * l.vpp);
    if (per_chunk == 0)
      return Status::Error("megatron: vpp " + Str(l.vpp) +
                           " needs the layers per virtual stage "
                           "(--num-layers-per-virtual-pipeline-stage): give a model or stage layers");
    args.push_back("--num-layers-per-virtual-pipeline-stage " + Str(per_chunk));
    return args;
  }
  if (even) return args;
  // vpp == 1, uneven: Megatron's first/last flags spread the rest evenly
  // over the middle stages; anything else needs the explicit layout.
  const size_t n = stages.size();
  const bool middle_even = n <= 2 || AllEqual(stages, 1, n - 1);
  if (n == 2) {
    args.push_back("--decoder-first-pipeline-num-layers " + Str(stages[0]));
  } else if (middle_even) {
    if (stages[0] != stages[1]) args.push_back("--decoder-first-pipeline-num-layers " + Str(stages[0]));
    if (stages[n - 1] != stages[1])
      args.push_back("--decoder-last-pipeline-num-layers " + Str(stages[n - 1]));
  } else {
    args.push_back(layout_arg());
  }
  return args;
}

// Megatron's --fp8-recipe for an FP8 precision.
const char* Fp8Recipe(Precision p) {
  switch (p) {
    case Precision::kFP8Delayed: return "delayed";
    case Precision::kFP8Tensorwise: return "tensorwise";
    case Precision::kFP8Blockwise: return "blockwise";
    case Precision::kMXFP8: return "mxfp8";
    case Precision::kBF16: break;
  }
  return "";
}

// Megatron's --attention-backend (its AttnBackend) for the job's backend:
// `fused` is Transformer Engine's fused attention (cuDNN), `flash` its
// FlashAttention path (FlashAttention-2, or FlashAttention-3 where that
// package is installed on Hopper).
const char* MegatronAttentionBackend(AttentionBackend b) {
  switch (b) {
    case AttentionBackend::kTeCudnn: return "fused";
    case AttentionBackend::kFlash2:
    case AttentionBackend::kFlash3: return "flash";
  }
  return "";
}

// What Megatron cannot run as planned, or "".
std::string Inexpressible(const Layout& l, const ExportContext& ctx) {
  // Megatron-Core runs 1F1B, and interleaved 1F1B from the vpp flags below.
  const PipelineSchedule schedule = l.schedule_or_default();
  if (schedule != PipelineSchedule::k1F1B && schedule != PipelineSchedule::kInterleaved1F1B) {
    return std::string("its pipeline schedules are 1f1b and interleaved-1f1b (from the virtual-pipeline flags); "
                       "it has no flag for ") + Name(schedule);
  }
  if (l.cp > 1 && l.cp_style == CpStyle::kUlysses && ctx.model) {
    const int kv_local = ctx.model->kv_heads / l.tp;
    if (kv_local % l.cp != 0) {
      return "its a2a (Ulysses) context parallelism needs kv_heads / tp (" + Str(kv_local) +
             ") divisible by cp (" + Str(l.cp) + "); this plan replicates KV heads (the job's "
             "ulysses_kv_replication), which Megatron has no flag for";
    }
  }
  return "";
}

// The recipe flags: optimizer sharding, precision, MoE dispatch, capacity,
// recompute, overlaps, MTP.
void RecipeArgs(const Layout& l, const ExportContext& ctx, bool moe, std::vector<std::string>* args) {
  if (l.fsdp) {
    // ZeRO-3: parameters, gradients and optimizer states sharded (what the
    // cost model assumes). Megatron asserts that Megatron-FSDP checkpoints
    // as fsdp_dtensor (arguments.py ~1169; its default is torch_dist).
    args->push_back("--use-megatron-fsdp");
    args->push_back("--data-parallel-sharding-strategy optim_grads_params");
    args->push_back("--ckpt-format fsdp_dtensor");
  } else if (!ctx.job || ctx.job->distributed_optimizer) {
    args->push_back("--use-distributed-optimizer");
    args->push_back("--overlap-grad-reduce");
    args->push_back("--overlap-param-gather");
  } else {
    args->push_back("--overlap-grad-reduce");
  }
  args->push_back("--bf16");
  if (ctx.job) {
    args->push_back(std::string("--attention-backend ") + MegatronAttentionBackend(ctx.job->attention_backend));
  }
  if (IsFp8(l.precision)) {
    args->push_back("--fp8-format hybrid");
    args->push_back(std::string("--fp8-recipe ") + Fp8Recipe(l.precision));
  }
  if (l.tp_overlap) args->push_back("--tp-comm-overlap");
  if (l.cuda_graphs.scope() == CudaGraphs::Scope::kFullIteration) {
    args->push_back("--cuda-graph-impl full_iteration");
  } else if (!l.cuda_graphs.none()) {
    // Transformer Engine's graphs; no modules: each whole layer.
    args->push_back("--cuda-graph-impl transformer_engine");
    if (l.cuda_graphs.scope() == CudaGraphs::Scope::kModules) {
      std::string modules;
      for (int i = 0; i < kCudaGraphModuleCount; ++i) {
        if ((l.cuda_graphs.modules() >> i) & 1u) modules += std::string(" ") + Name(CudaGraphModule(i));
      }
      args->push_back("--cuda-graph-modules" + modules);
    }
  }
  if (moe) {
    if (IsFlex(l.dispatcher)) {
      const bool deepep = l.dispatcher == Dispatcher::kDeepEP;
      args->push_back("--moe-token-dispatcher-type flex");
      args->push_back(std::string("--moe-flex-dispatcher-backend ") + (deepep ? "deepep" : "hybridep"));
      // One flag for either backend's SMs (transformer_config.py ~1792-1807;
      // --moe-deepep-num-sms / --moe-hybridep-num-sms are its deprecated spellings).
      if (ctx.job) {
        args->push_back("--moe-flex-dispatcher-num-sms " +
                        Str(deepep ? ctx.job->deepep_sms : ctx.job->hybridep_sms));
      }
    } else {
      args->push_back(std::string("--moe-token-dispatcher-type ") + Name(l.dispatcher));
    }
    args->push_back("--moe-grouped-gemm");
    if (!ctx.job || ctx.job->moe_permute_fusion) args->push_back("--moe-permute-fusion");
    if (!ctx.job || ctx.job->moe_router_fusion) args->push_back("--moe-router-fusion");
    if (ctx.job && ctx.job->capacity_factor > 0) {
      char cf[32];
      std::snprintf(cf, sizeof cf, "%g", ctx.job->capacity_factor);
      args->push_back(std::string("--moe-expert-capacity-factor ") + cf);
      args->push_back("--moe-token-drop-policy probs");
      args->push_back("--moe-pad-expert-input-to-capacity");
    } else if (ctx.job && ctx.job->routing_imbalance <= 1.0) {
      args->push_back("--moe-router-force-load-balancing");
    }
    if (l.a2a_overlap) {
      args->push_back("--overlap-moe-expert-parallel-comm");
      args->push_back("--delay-wgrad-compute");
    }
  }
  if (l.recompute.full()) {
    args->push_back("--recompute-granularity full");
    args->push_back("--recompute-method uniform");
    args->push_back("--recompute-num-layers 1");
  } else if (l.recompute.selective()) {
    std::string modules;
    for (int i = 0; i < kRecomputeModuleCount; ++i) {
      if (l.recompute.has(RecomputeModule(i))) modules += std::string(" ") + Name(RecomputeModule(i));
    }
    args->push_back("--recompute-granularity selective");
    args->push_back("--recompute-modules" + modules);
  }
  if (ctx.model && ctx.model->mtp_layers > 0) args->push_back("--mtp-num-layers " + Str(ctx.model->mtp_layers));
}

// Megatron ties the output layer to the input embedding unless told not to
// (pretrain_gpt.py; Mixtral, DeepSeek-V3 and Qwen3 are untied): the model
// file's tied_embeddings. Without a model, Megatron's default (a comment says so).
void ModelArgs(const ExportContext& ctx, std::vector<std::string>* args) {
  if (ctx.model && !ctx.model->tied_embeddings) args->push_back("--untie-embeddings-and-output-weights");
}

}  // namespace

Result<std::vector<std::string>> MegatronArgs(const RankMap& map, const ExportContext& ctx) {
  const Layout& l = map.layout();
  // What Megatron's own validation refuses (planner/trainer_rules.h).
  if (Status s = TrainerRefusal(Trainer::kMegatron, l, TrainerContext{ctx.cluster, ctx.model, ctx.job}); !s.ok())
    return s;
  std::string why;
  const std::string order = MatchingMegatronOrder(map, &why);
  if (const std::string inexpressible = Inexpressible(l, ctx); !inexpressible.empty())
    return Status::Error("megatron cannot express this layout: " + inexpressible);
  if (order.empty())
    return Status::Error("megatron cannot express this layout: it numbers ranks with " +
                         std::string(kDefaultOrder) + ", or " + kPpDpOrder +
                         " with --use-tp-pp-dp-mapping, and order '" + l.order +
                         "' gives groups neither produces for these degrees (" + why + ")");

  std::vector<std::string> args = {
      "--tensor-model-parallel-size " + Str(l.tp),
      "--pipeline-model-parallel-size " + Str(l.pp),
      "--context-parallel-size " + Str(l.cp),
  };
  if (l.cp > 1)
    args.push_back(std::string("--cp-comm-type ") + (l.cp_style == CpStyle::kUlysses ? "a2a" : "p2p"));
  args.push_back("--expert-model-parallel-size " + Str(l.ep));
  args.push_back("--expert-tensor-parallel-size " + Str(l.etp));
  if (l.tp > 1) args.push_back("--sequence-parallel");
  if (order == kPpDpOrder) args.push_back("--use-tp-pp-dp-mapping");
  Result<std::vector<std::string>> pipeline = PipelineArgs(l, ctx.model);
  if (!pipeline.ok()) return pipeline.status();
  args.insert(args.end(), pipeline->begin(), pipeline->end());
  args.push_back("--micro-batch-size " + Str(l.mbs));
  if (ctx.job) {
    args.push_back("--global-batch-size " + Str(ctx.job->global_batch));
    args.push_back("--seq-length " + Str(ctx.job->seq_len));
  }
  ModelArgs(ctx, &args);
  RecipeArgs(l, ctx, ctx.model ? ctx.model->is_moe() : true, &args);
  return args;
}

Result<std::string> ExportMegatron(const RankMap& map, const ExportContext& ctx) {
  const Result<std::vector<std::string>> flags = MegatronArgs(map, ctx);
  if (!flags.ok()) return flags.status();
  const std::vector<std::string>& args = *flags;
  const Layout& l = map.layout();
  const bool moe = ctx.model ? ctx.model->is_moe() : true;
  std::string out = "# Megatron-LM parallelism arguments for " + FormatLayout(l) + "\n";
  out += "# world size " + Str(l.world) + " (dp " + Str(l.dp) + ", edp " + Str(l.edp) + " follow from it)\n";
  if (!ctx.job) out += "# no job given: add --global-batch-size and --seq-length\n";
  if (!ctx.model) {
    out += "# no model given: not checked against one (heads, KV heads and FFN widths by tp, experts by ep, "
           "the pipeline split); the MoE flags assume an MoE model, the embeddings Megatron's default "
           "(tied: add --untie-embeddings-and-output-weights for an untied model)\n";
  }
  if (ctx.job && ctx.job->attention_backend == AttentionBackend::kFlash3) {
    out += "# attention flash3: FlashAttention-3 must be installed; Transformer Engine's flash path "
           "(--attention-backend flash) runs it on Hopper\n";
  }
  if (moe && ctx.job && ctx.job->capacity_factor <= 0 && ctx.job->routing_imbalance <= 1.0) {
    out += "# the plan assumes perfectly balanced routing (routing_imbalance 1): Megatron's benchmark mode\n";
  }

  out += export_util::PlacementNote(map, "#");
  // The environment Megatron asserts (launch_files.h, the one home of the
  // condition; the launcher outputs set it too).
  for (const LaunchEnv& e : TrainerLaunchEnv(l)) {
    out += "# before the trainer starts: export " + e.name + "=" + e.value + "  # " + e.why + "\n";
  }
  if ((l.tp > 1 || l.cp > 1) && !NeedsOneCudaDeviceConnection(l)) {
    out += "# CUDA_DEVICE_MAX_CONNECTIONS is not set to 1: Megatron asserts it only without Megatron-FSDP and "
           "the EP overlap\n";
  }
  for (size_t i = 0; i < args.size(); ++i) out += args[i] + (i + 1 < args.size() ? " \\\n" : "\n");
  return out;
}

}  // namespace foldplan
