#include "planner/trainer_rules.h"

#include <algorithm>
#include <array>
#include <utility>

#include "core/order_string.h"
#include "planner/export_util.h"
#include "topology/cluster_shape.h"

namespace foldplan {
namespace {

std::string Str(long long v) { return std::to_string(v); }


// A process group kind as the digits it varies: (stride, size) runs of rank
// digits, sorted by stride, size-1 digits dropped and adjacent runs merged
// (stride s size n then stride s*n is one run). Two numberings give the
// same groups of a kind exactly when their runs are equal: the group of
// rank 0 is the set of sums of a run's multiples, and the others are its
// translates.
using Runs = std::vector<std::pair<long long, long long>>;
struct Digit {
  long long stride = 1;
  long long size = 1;
};
Runs RunsOf(std::vector<Digit> digits) {
  std::erase_if(digits, [](const Digit& d) { return d.size <= 1; });
  std::sort(digits.begin(), digits.end(), [](const Digit& a, const Digit& b) { return a.stride < b.stride; });
  Runs runs;
  for (const Digit& d : digits) {
    if (!runs.empty() && runs.back().first * runs.back().second == d.stride) {
      runs.back().second *= d.size;
    } else {
      runs.emplace_back(d.stride, d.size);
    }
  }
  return runs;
}

// The group kinds a trainer's numbering is compared on: tp, cp, dp, pp of
// the dense view; ep, etp, edp of the expert view.
enum Kind { kTp, kCp, kDp, kPp, kEp, kEtp, kEdp, kKinds };
constexpr std::array<const char*, kKinds> kKindNames = {"tp", "cp", "dp", "pp", "ep", "etp", "edp"};
using Numbering = std::array<Runs, kKinds>;

// Megatron's RankGenerator: axes in the order string's order, fastest
// first, each stride the product of the sizes before it; the dense view
// with ep 1, the expert view with etp for tp, edp for dp and cp 1.
// Missing axes are size 1 (as Megatron appends them).
Numbering MegatronNumbering(const Layout& l, const std::string& order) {
  const OrderString parsed = ParseOrderString(order);
  // kOrderAxisNames: tp, cp, ep, dp, pp.
  const std::array<long long, 5> dense_sizes = {l.tp, l.cp, 1, l.dp, l.pp};
  const std::array<long long, 5> expert_sizes = {l.etp, 1, l.ep, l.edp, l.pp};
  std::array<Digit, 5> dense{}, expert{};
  long long ds = 1, es = 1;
  for (int i = 0; i < parsed.count; ++i) {
    const int a = parsed.axes[static_cast<size_t>(i)];
    dense[static_cast<size_t>(a)] = {ds, dense_sizes[static_cast<size_t>(a)]};
    expert[static_cast<size_t>(a)] = {es, expert_sizes[static_cast<size_t>(a)]};
    ds *= dense_sizes[static_cast<size_t>(a)];
    es *= expert_sizes[static_cast<size_t>(a)];
  }
  enum { kT, kC, kE, kD, kP };
  return {RunsOf({dense[kT]}), RunsOf({dense[kC]}),  RunsOf({dense[kD]}),  RunsOf({dense[kP]}),
          RunsOf({expert[kE]}), RunsOf({expert[kT]}), RunsOf({expert[kD]})};
}

// A row-major mesh (slowest axis first, as torch's DeviceMesh and JAX
// number devices): each axis' stride is the product of the sizes after it.
std::vector<Digit> RowMajor(const std::vector<long long>& shape) {
  std::vector<Digit> out(shape.size());
  long long stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    out[i] = {stride, shape[i]};
    stride *= shape[i];
  }
  return out;
}

// MaxText's mesh (export_util::MaxTextMeshShape's axes: data, stage, fsdp,
// context, tensor, expert, slowest first) as group kinds: the dense layers'
// batch is sharded over data, fsdp and expert; the experts' data parallel
// group is data, fsdp and context.
Numbering MaxTextNumbering(const Layout& l) {
  const std::vector<int> shape = export_util::MaxTextMeshShape(l);
  const std::vector<Digit> d = RowMajor(std::vector<long long>(shape.begin(), shape.end()));
  enum { kData, kStage, kFsdp, kContext, kTensor, kExpert };
  return {RunsOf({d[kTensor]}), RunsOf({d[kContext]}), RunsOf({d[kData], d[kFsdp], d[kExpert]}),
          RunsOf({d[kStage]}),  RunsOf({d[kExpert]}),  RunsOf({d[kTensor]}),
          RunsOf({d[kData], d[kFsdp], d[kContext]})};
}

std::string RunsText(const Runs& runs) {
  if (runs.empty()) return "none";
  std::string out;
  for (const auto& [stride, size] : runs) {
    out += (out.empty() ? "" : " x ") + Str(size) + " at stride " + Str(stride);
  }
  return out;
}

// "" when `theirs` numbers ranks as the layout's order does, else the first
// group kind that differs.
std::string NumberingMismatch(const Layout& l, const Numbering& theirs, const char* mesh) {
  const Numbering ours = MegatronNumbering(l, l.order);
  for (int k = 0; k < kKinds; ++k) {
    if (ours[static_cast<size_t>(k)] != theirs[static_cast<size_t>(k)]) {
      return std::string("its mesh ") + mesh + " gives " + kKindNames[static_cast<size_t>(k)] + " groups of " +
             RunsText(theirs[static_cast<size_t>(k)]) + ", order " + l.order + " gives " +
             RunsText(ours[static_cast<size_t>(k)]);
    }
  }
  return "";
}

bool HasExperts(const Layout& l, const TrainerContext& ctx) { return ctx.model ? ctx.model->is_moe() : l.ep > 1; }

Violation V(Rule rule, std::string detail) { return {rule, std::move(detail)}; }

// The ranks per NVLink domain the layout uses, as its rank map places them:
// consecutive ranks fill a domain (its first gpus_per_domain GPUs when the
// job says so), packed placement whole heavy blocks of it.
int RanksPerDomain(const Layout& l, const TrainerContext& ctx) {
  if (!ctx.cluster) return l.world;
  int domain = ctx.cluster->nvlink_domain_gpus;
  if (ctx.job && ctx.job->gpus_per_domain > 0) domain = std::min(domain, ctx.job->gpus_per_domain);
  if (l.placement == Placement::kPacked) {
    const int block = HeavyBlock(l);
    if (block > 0 && PackBlocks(l.world, block, domain).packs) domain = domain / block * block;
  }
  return std::min(domain, l.world);
}

std::optional<Violation> Schedule(Trainer t, const Layout& l) {
  if (l.pp == 1) return std::nullopt;
  const PipelineSchedule s = l.schedule_or_default();
  switch (t) {
    case Trainer::kTorchtitan:
      if (!export_util::TorchPipelineSchedule(s))
        return V(Rule::kTrainerSchedule, export_util::NoTorchScheduleReason(s, "torchtitan"));
      break;
    case Trainer::kOlmoCore:
      if (s != PipelineSchedule::k1F1B && s != PipelineSchedule::kInterleaved1F1B && s != PipelineSchedule::kGPipe)
        return V(Rule::kTrainerSchedule, std::string("OLMo-core's PipelineScheduleType has no ") + Name(s) +
                                             " (it runs single_1F1B, interleaved_1F1B, gpipe)");
      break;
    case Trainer::kMaxText:
      if (s == PipelineSchedule::kZeroBubbleH1 || s == PipelineSchedule::kDualPipeV)
        return V(Rule::kTrainerSchedule, std::string("MaxText's pipeline has no ") + Name(s) +
                                             " (it runs its own GPipe-like circular schedule)");
      break;
    case Trainer::kMegatron:
    case Trainer::kJax: break;
  }
  return std::nullopt;
}

std::optional<Violation> ExpertRules(Trainer t, const Layout& l, const TrainerContext& ctx) {
  if (!HasExperts(l, ctx)) return std::nullopt;
  switch (t) {
    case Trainer::kTorchtitan:
      if (l.ep > 1 && l.etp != 1)
        return V(Rule::kTrainerExpertTp, "torchtitan's experts are never tensor-parallel with EP (etp 1), this "
                                         "layout has etp " + Str(l.etp));
      if (l.ep == 1 && l.etp != l.tp)
        return V(Rule::kTrainerExpertTp, "without EP torchtitan shards experts over the TP mesh (etp = tp " +
                                             Str(l.tp) + "), this layout has etp " + Str(l.etp));
      break;
    case Trainer::kOlmoCore:
      if (l.etp != 1)
        return V(Rule::kTrainerExpertTp,
                 "OLMo-core's expert config has only a degree (etp 1), this layout has etp " + Str(l.etp));
      if (l.ep > 1 && l.tp > 1)
        return V(Rule::kTrainerExpertTp, "OLMo-core's EP is mutually exclusive with TP (\"TP + EP is not "
                                         "implemented yet\"), this layout has tp " + Str(l.tp) + ", ep " + Str(l.ep));
      if (l.ep > 1 && l.cp > 1)
        return V(Rule::kTrainerEpNeedsHsdp, "OLMo-core's EP groups are HSDP's shard groups, which hold no CP "
                                            "rank; this layout has cp " + Str(l.cp) + " with ep " + Str(l.ep));
      if (l.ep > 1 && l.dp % l.ep != 0)
        return V(Rule::kTrainerEpNeedsHsdp, "OLMo-core's EP is HSDP's shard dimension, so ep " + Str(l.ep) +
                                                " must divide dp " + Str(l.dp));
      break;
    case Trainer::kMaxText:
      if (l.etp != l.tp)
        return V(Rule::kTrainerExpertTp, "MaxText shards the experts' hidden dim over its tensor axis, so etp "
                                         "must equal tp " + Str(l.tp) + "; this layout has etp " + Str(l.etp));
      if (l.dp % l.ep != 0)
        return V(Rule::kTrainerEpRanks, "MaxText's expert axis is a batch axis of the dense layers, so ep " +
                                            Str(l.ep) + " must divide dp " + Str(l.dp));
      break;
    case Trainer::kMegatron:
    case Trainer::kJax: break;
  }
  return std::nullopt;
}

std::optional<Violation> PipelineSplit(Trainer t, const Layout& l, const TrainerContext& ctx) {
  if (t != Trainer::kMaxText || l.pp == 1) return std::nullopt;
  if (ctx.model) {
    const ModelSpec& m = *ctx.model;
    for (int i = 1; i < m.layers; ++i) {
      if (m.layer_is_moe(i) != m.layer_is_moe(0))
        return V(Rule::kTrainerPipelineSplit,
                 "MaxText pipelines one kind of decoder layer, " + m.name + " mixes dense and MoE layers (layer " +
                     Str(i) + " differs from layer 0); pp must be 1");
    }
  }
  if (l.vpp > 1)
    return V(Rule::kTrainerPipelineSplit, "MaxText's pipeline repeats are not read: vpp " +
                                              Str(l.vpp) + " would run another layout; vpp must be 1");
  const std::vector<int>& s = l.stage_layers;
  if (!s.empty() && std::any_of(s.begin(), s.end(), [&](int n) { return n != s.front(); }))
    return V(Rule::kTrainerPipelineSplit, "MaxText splits pipeline_parallel_layers evenly over pp stages, "
                                          "this layout's split is uneven");
  if (s.empty() && ctx.model && ctx.model->layers % l.pp != 0)
    return V(Rule::kTrainerPipelineSplit, "MaxText splits pipeline_parallel_layers evenly over pp stages, and " +
                                              Str(ctx.model->layers) + " layers do not divide over pp " + Str(l.pp));
  if (!l.stage_mtp.empty())
    return V(Rule::kTrainerPipelineSplit, "MaxText's pipeline holds no MTP layers placed by a pipeline layout");
  return std::nullopt;
}

std::optional<Violation> Order(Trainer t, const Layout& l) {
  std::string why;
  switch (t) {
    case Trainer::kTorchtitan:
      why = NumberingMismatch(l, MegatronNumbering(l, kDefaultOrder),
                              "(pp, dp_replicate, dp_shard, cp, tp), EP the innermost dp_shard x cp x tp ranks,");
      break;
    case Trainer::kOlmoCore:
      why = NumberingMismatch(l, MegatronNumbering(l, kDefaultOrder),
                              "(pp, dp_replicate, dp_shard, cp, tp), EP HSDP's dp_shard,");
      break;
    case Trainer::kMaxText:
      why = NumberingMismatch(l, MaxTextNumbering(l), "(data, stage, fsdp, context, tensor, expert)");
      break;
    case Trainer::kJax:
      if (auto mesh = export_util::BuildFoldedMesh(l); !mesh.ok()) why = mesh.status().message();
      break;
    case Trainer::kMegatron: break;
  }
  if (why.empty()) return std::nullopt;
  return V(Rule::kTrainerOrder, why);
}

std::optional<Violation> MeshSplit(Trainer t, const Layout& l, const TrainerContext& ctx) {
  if (t != Trainer::kMaxText) return std::nullopt;
  const int granule = RanksPerDomain(l, ctx);
  if (l.world % granule != 0)
    return V(Rule::kTrainerMeshSplit, "world " + Str(l.world) + " is no whole number of NVLink domains of " +
                                          Str(granule) + " ranks");
  const std::vector<int> shape = export_util::MaxTextMeshShape(l);
  if (auto split = export_util::SplitIciDcnOf(shape, granule, l.world / granule); !split.ok())
    return V(Rule::kTrainerMeshSplit, split.status().message());
  return std::nullopt;
}

// Megatron's recompute modules other than its selective default (core_attn).
bool ModuleSet(const Recompute& r) { return r.selective() && r != Recompute::Selective(); }

std::optional<Violation> Recipe(Trainer t, const Layout& l) {
  const char* who = Name(t);
  auto refuse = [&](const std::string& what) { return V(Rule::kTrainerRecipe, std::string(who) + " " + what); };
  if (t == Trainer::kMegatron || t == Trainer::kJax) return std::nullopt;
  if (l.a2a_overlap) return refuse("has no Megatron EP all-to-all overlap (a2a_overlap)");
  if (!l.cuda_graphs.none()) return refuse("captures no Megatron CUDA graphs (cuda_graphs " + Name(l.cuda_graphs) + ")");
  switch (t) {
    case Trainer::kTorchtitan:
      if (l.dispatcher == Dispatcher::kAllGather) return refuse("has no allgather dispatcher (standard, deepep, hybridep)");
      // Its FP8 and MX converters exist, but the Trainer.Config field that
      // takes them was not read (doc/trainers.md): an export could not load.
      if (l.precision != Precision::kBF16)
        return refuse(std::string("export carries no FP8 recipe (the Trainer.Config field of its quantization "
                                  "converters was not read): ") + Name(l.precision) + " would not load");
      if (ModuleSet(l.recompute))
        return refuse("checkpoints whole blocks or ops (full, selective), not Megatron's modules " + Name(l.recompute));
      break;
    case Trainer::kOlmoCore:
    case Trainer::kMaxText:
      if (l.tp_overlap) return refuse("has no TP communication overlap to export (tp_overlap)");
      if (l.dispatcher != Dispatcher::kAllToAll && l.dispatcher != Dispatcher::kAllGather)
        return refuse(std::string("has no ") + Name(l.dispatcher) + " dispatcher");
      if (t == Trainer::kOlmoCore && l.dispatcher != Dispatcher::kAllToAll)
        return refuse("moves tokens with its own all-to-all only");
      if (l.precision != Precision::kBF16)
        return refuse(std::string("export carries no FP8 recipe: ") + Name(l.precision) + " would run bf16");
      if (t == Trainer::kMaxText && ModuleSet(l.recompute))
        return refuse("remat policies name no Megatron modules (" + Name(l.recompute) + ")");
      break;
    case Trainer::kMegatron:
    case Trainer::kJax: break;
  }
  return std::nullopt;
}

std::optional<Violation> DataParallel(Trainer t, const Layout& l) {
  if (t == Trainer::kTorchtitan && !l.fsdp)
    return V(Rule::kTrainerDataParallel, "torchtitan's data parallelism is FSDP2 (data_parallel_shard_degree), "
                                         "not a ZeRO-1 distributed optimizer: fsdp must be 1");
  if (t == Trainer::kOlmoCore && l.ep > 1 && !l.fsdp)
    return V(Rule::kTrainerDataParallel, "OLMo-core runs EP only with HSDP data parallelism (sharded weights): "
                                         "fsdp must be 1");
  return std::nullopt;
}

// Megatron's own validation that every trainer's layout passes too (the
// layout is Megatron's description of the run).
std::optional<Violation> MegatronRecipe(const Layout& l, const TrainerContext& ctx) {
  if (ctx.job && l.dispatcher == Dispatcher::kDeepEP && ctx.job->capacity_factor > 0)
    return V(Rule::kDeepEpNoPadding, "the DeepEP flex dispatcher refuses --moe-pad-expert-input-to-capacity "
                                     "(capacity_factor " + Str(static_cast<long long>(ctx.job->capacity_factor)) +
                                         "); HybridEP accepts it");
  if (l.precision == Precision::kFP8Delayed &&
      (l.recompute.has(RecomputeModule::kMoeAct) || l.recompute.has(RecomputeModule::kLayernorm)))
    return V(Rule::kFp8DelayedRecompute,
             "--fp8-recipe delayed refuses the moe_act and layernorm recompute modules (recompute " +
                 Name(l.recompute) + ")");
  return std::nullopt;
}

}  // namespace

std::optional<Violation> MegatronRecipeProblem(const Layout& l, const JobSpec* job) {
  return MegatronRecipe(l, TrainerContext{nullptr, nullptr, job});
}

std::optional<Violation> TrainerArrangementProblem(Trainer t, const Layout& l, const TrainerContext& ctx) {
  if (t == Trainer::kMegatron) return std::nullopt;
  if (auto v = Schedule(t, l)) return v;
  if (t == Trainer::kTorchtitan && l.cp > 1 && l.cp_style != CpStyle::kRing)
    return V(Rule::kTrainerCpStyle, "torchtitan's context parallelism is ring attention only, this layout uses "
                                    "Ulysses CP " + Str(l.cp));
  if (auto v = ExpertRules(t, l, ctx)) return v;
  if (auto v = PipelineSplit(t, l, ctx)) return v;
  if (auto v = Order(t, l)) return v;
  return MeshSplit(t, l, ctx);
}

std::optional<Violation> TrainerRecipeProblem(Trainer t, const Layout& l, const TrainerContext&) {
  if (t == Trainer::kMegatron) return std::nullopt;
  if (auto v = DataParallel(t, l)) return v;
  return Recipe(t, l);
}

std::vector<Violation> CheckTrainer(Trainer t, const Layout& l, const TrainerContext& ctx) {
  std::vector<Violation> out;
  if (auto v = TrainerArrangementProblem(t, l, ctx)) out.push_back(*v);
  if (auto v = TrainerRecipeProblem(t, l, ctx)) out.push_back(*v);
  return out;
}

Status TrainerRefusal(Trainer t, const Layout& l, const TrainerContext& ctx) {
  std::vector<Violation> v;
  if (auto m = MegatronRecipe(l, ctx)) v.push_back(*m);
  if (v.empty()) v = CheckTrainer(t, l, ctx);
  if (v.empty()) return Status();
  std::string out = std::string(Name(t)) + " cannot run this layout: " + Name(v[0].rule) + ": " + v[0].detail +
                    " (doc/trainers.md)";
  if (t != Trainer::kMegatron)
    out += std::string("; `foldplan plan --trainer ") + Name(t) + "` on the same inputs finds the best layout it runs";
  return Status::Error(out);
}

std::vector<std::string> TrainerCostNotes(Trainer t, const Layout& l, const TrainerContext& ctx) {
  std::vector<std::string> notes;
  switch (t) {
    case Trainer::kTorchtitan:
      if (l.recompute == Recompute::Selective())
        notes.push_back("torchtitan's selective AC picks ops by its own policy; priced as Megatron's selective "
                        "recompute (core attention)");
      if (l.tp_overlap)
        notes.push_back("torchtitan overlaps TP with async TP under torch.compile; priced as Megatron's "
                        "--tp-comm-overlap");
      break;
    case Trainer::kOlmoCore:
      if (!l.fsdp && l.dp > 1)
        notes.push_back("OLMo-core's DDP keeps whole optimizer states on every rank; priced as Megatron's "
                        "distributed optimizer, which shards them over dp " + Str(l.dp));
      if (HasExperts(l, ctx) && l.ep > 1 && l.dp > l.ep)
        notes.push_back("OLMo-core shards weights HSDP with shard = ep " + Str(l.ep) + " and " + Str(l.dp / l.ep) +
                        " replicas; priced as Megatron FSDP sharding over dp " + Str(l.dp));
      break;
    case Trainer::kMaxText: {
      if (l.ep > 1)
        notes.push_back("MaxText's expert axis also shards the dense weights (FSDP-like over ep " + Str(l.ep) +
                        "); not priced");
      const std::vector<int> shape = export_util::MaxTextMeshShape(l);
      const bool on_fsdp = shape[2] > 1;
      if (l.dp / l.ep > 1 && on_fsdp != l.fsdp)
        notes.push_back(std::string("MaxText's ") + (on_fsdp ? "fsdp axis shards" : "data axis replicates") +
                        " the weights over dp/ep " + Str(l.dp / l.ep) + "; priced as " +
                        (l.fsdp ? "Megatron FSDP" : "Megatron's distributed optimizer"));
      if (l.pp > 1)
        notes.push_back(std::string("MaxText runs its own circular pipeline schedule; priced as ") +
                        Name(l.schedule_or_default()));
      break;
    }
    case Trainer::kJax:
      notes.push_back("the jax export is the device mesh only; the step is priced as Megatron runs it");
      break;
    case Trainer::kMegatron: break;
  }
  return notes;
}

JobSpec JobForTrainer(const JobSpec& job) {
  JobSpec out = job;
  auto add = [](auto& list, auto value) {
    if (std::find(list.begin(), list.end(), value) == list.end()) list.push_back(value);
  };
  if (job.trainer == Trainer::kTorchtitan) {
    add(out.cp_styles, CpStyle::kRing);
    add(out.fsdp, true);
    if (job.pipeline_schedules.empty()) {
      out.pipeline_schedules = {PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B,
                                PipelineSchedule::kDualPipeV};
    }
  }
  if (job.trainer == Trainer::kOlmoCore) add(out.fsdp, true);
  return out;
}

}  // namespace foldplan
