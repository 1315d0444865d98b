#include "cli/commands.h"
#include "cli/output.h"
#include "cli/csv.h"
#include "cli/usage_errors.h"

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/formats.h"
#include "inputs/checked_product.h"
#include "costmodel/evaluate.h"
#include "costmodel/layout_verdict.h"
#include "core/text_table.h"
#include "inputs/loader.h"
#include "costmodel/plan_file.h"
#include "planner/enumerate.h"
#include "planner/launch_files.h"
#include "planner/layout_json.h"
#include "planner/legality.h"
#include "planner/trainer_rules.h"
#include "planner/pipeline.h"
#include "planner/rank_export.h"
#include "planner/rank_map.h"
#include "topology/topology.h"

namespace foldplan {
namespace {

using json = nlohmann::ordered_json;
using Align = TextTable::Align;

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// A comma-separated candidate flag (--precision, --recompute, --dispatcher)
// read into `list`, each item by `parse`, whose error is the flag's message.
template <class T, class Parse>
Status ReadListFlag(const std::optional<std::string>& text, Parse parse, std::vector<T>* list) {
  if (!text) return Status();
  list->clear();
  for (const std::string& item : SplitList(*text)) {
    Result<T> value = parse(item);
    if (!value.ok()) return value.status();
    list->push_back(std::move(value).value());
  }
  return Status();
}

Result<Precision> PrecisionFlagItem(const std::string& name) {
  if (const auto p = ParsePrecision(name)) return *p;
  return Status::Error("--precision: expected one of " + std::string(PrecisionChoices()) + ", found \"" + name + "\"" +
                       DidYouMean(name, ChoiceNames(PrecisionChoices())));
}

Result<Recompute> RecomputeFlagItem(const std::string& name) {
  Result<Recompute> r = ParseRecompute(name);
  if (!r.ok()) return Status::Error("--recompute " + name + ": " + r.status().message());
  return r;
}

Result<Dispatcher> DispatcherFlagItem(const std::string& name) {
  if (const auto d = ParseDispatcher(name)) return *d;
  return Status::Error("--dispatcher: expected one of " + std::string(DispatcherChoices()) + ", found \"" + name +
                       "\"" + DidYouMean(name, ChoiceNames(DispatcherChoices())));
}

Result<CudaGraphs> CudaGraphsFlagItem(const std::string& name) {
  Result<CudaGraphs> g = ParseCudaGraphs(name);
  if (!g.ok()) return Status::Error("--cuda-graphs " + name + ": " + g.status().message());
  return g;
}

Result<CpStyle> CpStyleFlagItem(const std::string& name) {
  if (name == "ulysses") return CpStyle::kUlysses;
  if (name == "ring") return CpStyle::kRing;
  return Status::Error("--cp-style: expected one of ulysses, ring, found \"" + name + "\"" +
                       DidYouMean(name, {"ulysses", "ring"}));
}

Result<PipelineSchedule> ScheduleFlagItem(const std::string& name) {
  if (const auto s = PipelineScheduleNamed(name)) return *s;
  return Status::Error("--schedule: expected one of " + PipelineScheduleChoices() + ", found \"" + name + "\"" +
                       DidYouMean(name, ChoiceNames(PipelineScheduleChoices())));
}

// An on/off candidate flag's item (--fsdp, --tp-overlap, --a2a-overlap),
// spelled as the layout keys spell it: 0 or 1, false or true.
auto BoolFlagItem(const char* flag) {
  return [flag](const std::string& text) -> Result<bool> {
    if (text == "1" || text == "true") return true;
    if (text == "0" || text == "false") return false;
    return Status::Error(std::string(flag) + ": expected 0 or 1 (or false, true), found \"" + text + "\"");
  };
}

// A candidate flag's repeat, by the job reader's rule (RepeatedCandidates):
// "--dispatcher: deepep given twice (flex is deepep)"; the note names the
// spellings that are aliases of the value.
std::string RepeatText(const char* flag, const std::string& text, const RepeatedCandidate& r) {
  const std::vector<std::string> items = SplitList(text);
  std::vector<std::string> aliases;
  for (size_t i : {r.first, r.index}) {
    if (items[i] != r.value && std::find(aliases.begin(), aliases.end(), items[i]) == aliases.end())
      aliases.push_back(items[i]);
  }
  std::string note;
  for (const std::string& a : aliases) note += (note.empty() ? "" : " and ") + a;
  if (!note.empty()) note = " (" + note + (aliases.size() > 1 ? " are " : " is ") + r.value + ")";
  return std::string(flag) + ": " + r.value + " given twice" + note;
}

// An integer flag's value in [lo, hi], the range of the file field it
// overrides: "--seq: expected an integer in [1, 16777216], found 0".
Status CheckIntFlag(const char* flag, const std::optional<int>& value, int64_t lo, int64_t hi) {
  if (!value || (*value >= lo && *value <= hi)) return Status();
  return Status::Error(std::string(flag) + ": expected an integer in [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "], found " + std::to_string(*value));
}

// Applies the job overrides, each checked against its job field's range
// (inputs/job.h; --gpus and --gpus-per-domain are positive, 0 being the
// file's "all").
Status ApplyJobOverrides(const InputOptions& o, JobSpec* job) {
  const struct {
    const char* flag;
    const std::optional<int>& value;
    int64_t lo, hi;
  } ranges[] = {{"--seq", o.seq, 1, kMaxSeqLen},
                {"--global-batch", o.global_batch, 1, kMaxGlobalBatch},
                {"--micro-batch", o.micro_batch, 1, kMaxMicroBatch},
                {"--gpus", o.gpus, 1, kMaxWorldSize},
                {"--mtp", o.mtp, 0, kMaxMtpLayers},
                {"--gpus-per-domain", o.gpus_per_domain, 1, kMaxWorldSize}};
  for (const auto& r : ranges) {
    if (Status s = CheckIntFlag(r.flag, r.value, r.lo, r.hi); !s.ok()) return s;
  }
  if (o.seq) job->seq_len = *o.seq;
  if (o.global_batch) job->global_batch = *o.global_batch;
  if (o.micro_batch) job->micro_batch_sizes = {*o.micro_batch};
  if (o.gpus) job->world_size = *o.gpus;
  if (Status s = ReadListFlag(o.precision, &PrecisionFlagItem, &job->precisions); !s.ok()) return s;
  if (Status s = ReadListFlag(o.recompute, &RecomputeFlagItem, &job->recompute); !s.ok()) return s;
  if (Status s = ReadListFlag(o.dispatcher, &DispatcherFlagItem, &job->dispatchers); !s.ok()) return s;
  if (Status s = ReadListFlag(o.cuda_graphs, &CudaGraphsFlagItem, &job->cuda_graphs); !s.ok()) return s;
  if (o.dispatcher) job->dispatchers_named = true;  // not the cluster's (JobForCluster)
  if (Status s = ReadListFlag(o.cp_style, &CpStyleFlagItem, &job->cp_styles); !s.ok()) return s;
  if (Status s = ReadListFlag(o.fsdp, BoolFlagItem("--fsdp"), &job->fsdp); !s.ok()) return s;
  if (Status s = ReadListFlag(o.tp_overlap, BoolFlagItem("--tp-overlap"), &job->tp_overlap); !s.ok()) return s;
  if (Status s = ReadListFlag(o.a2a_overlap, BoolFlagItem("--a2a-overlap"), &job->a2a_overlap); !s.ok()) return s;
  if (Status s = ReadListFlag(o.schedule, &ScheduleFlagItem, &job->pipeline_schedules); !s.ok()) return s;
  if (o.attention_backend) {
    const auto b = ParseAttentionBackend(*o.attention_backend);
    if (!b) {
      return Status::Error("--attention-backend: expected one of " + std::string(AttentionBackendChoices()) +
                           ", found \"" + *o.attention_backend + "\"" +
                           DidYouMean(*o.attention_backend, ChoiceNames(AttentionBackendChoices())));
    }
    job->attention_backend = *b;
  }
  if (o.trainer) {
    const auto t = ParseTrainer(*o.trainer);
    if (!t) {
      return Status::Error("--trainer: expected one of " + std::string(TrainerChoices()) + ", found \"" + *o.trainer +
                           "\"" + DidYouMean(*o.trainer, ChoiceNames(TrainerChoices())));
    }
    job->trainer = *t;
  }
  // The same ranges as the job file's fields (inputs/job.h, doc/formats.md).
  if (o.capacity_factor) {
    if (!CapacityFactorValid(*o.capacity_factor))
      return Status::Error(std::string("--capacity-factor: expected ") + kCapacityFactorExpected + ", found " +
                           (std::ostringstream() << *o.capacity_factor).str());
    job->capacity_factor = *o.capacity_factor;
  }
  if (o.routing_imbalance) {
    if (!(*o.routing_imbalance >= 1 && *o.routing_imbalance <= kMaxRoutingImbalance))
      return Status::Error("--routing-imbalance: expected a number in [1, " + std::to_string(kMaxRoutingImbalance) +
                           "] (1: forced balance)");
    job->routing_imbalance = *o.routing_imbalance;
  }
  if (o.mtp) job->mtp_layers = *o.mtp;
  if (o.gpus_per_domain) job->gpus_per_domain = *o.gpus_per_domain;
  // A repeated candidate would be enumerated twice: the job reader's rule on
  // the lists the flags gave (a job file's or recipe's were checked when read).
  const struct {
    const char* field;
    const char* flag;
    const std::optional<std::string>& text;
  } flags[] = {{"precision", "--precision", o.precision},
               {"recompute", "--recompute", o.recompute},
               {"dispatcher", "--dispatcher", o.dispatcher},
               {"cuda_graphs", "--cuda-graphs", o.cuda_graphs},
               {"cp_styles", "--cp-style", o.cp_style},
               {"fsdp", "--fsdp", o.fsdp},
               {"tp_overlap", "--tp-overlap", o.tp_overlap},
               {"a2a_overlap", "--a2a-overlap", o.a2a_overlap},
               {"pipeline_schedules", "--schedule", o.schedule}};
  for (const RepeatedCandidate& r : RepeatedCandidates(*job)) {
    for (const auto& f : flags) {
      if (f.text && r.field == f.field) return Status::Error(RepeatText(f.flag, *f.text, r));
    }
  }
  return Status();
}

// Where the job's value of `key` came from when no flag set it, for
// messages: "FILE: /KEY" of the job file; for a recipe, the recipe's
// /job/KEY when it sets the field, else its base job file's /KEY.
std::string JobFieldOrigin(const JobSpec& job, const std::optional<RecipeSpec>& recipe, const std::string& key) {
  if (!recipe) return job.source + ": /" + key;
  if (recipe->job_settings.contains(key)) return recipe->source + ": /job/" + key;
  return recipe->job_base_source + ": /" + key;
}

// Where the job's gpus_per_domain came from, for its errors: the flag, the
// recipe's /cluster/gpus_per_domain, or the job file's /gpus_per_domain.
std::string GpusPerDomainOrigin(const InputOptions& o, const JobSpec& job, const std::optional<RecipeSpec>& recipe) {
  if (o.gpus_per_domain) return "--gpus-per-domain";
  if (recipe) return recipe->source + ": /cluster/gpus_per_domain";
  return JobFieldOrigin(job, std::nullopt, "gpus_per_domain");
}

// What the job asks of the model: its MTP layers.
void ApplyJobToModel(const JobSpec& job, ModelSpec* model) {
  if (job.mtp_layers) model->mtp_layers = *job.mtp_layers;
}

// What the job asks of the cluster: only the first gpus_per_domain GPUs of
// every NVLink domain (0: all). The one place the cluster is cut, from the
// job's final setting (job file, recipe or --gpus-per-domain), in every
// command; `origin` (GpusPerDomainOrigin) heads the error when the cluster
// cannot give it.
Status ApplyJobToCluster(const JobSpec& job, const std::string& origin, ClusterSpec* cluster) {
  if (job.gpus_per_domain > 0) {
    Result<ClusterSpec> part = UsingGpusPerDomain(*cluster, job.gpus_per_domain);
    if (!part.ok()) return Status::Error(origin + ": " + part.status().message());
    *cluster = std::move(part).value();
  }
  return Status();
}

std::string Precisions(const JobSpec& job) {
  std::string out;
  for (Precision p : job.precisions) out += (out.empty() ? "" : "/") + std::string(Name(p));
  return out;
}

std::string StagesText(const Layout& l) {
  // Per pipeline rank: "7/8/8/8/8/8/8/6"; even splits as "8 each".
  std::vector<int> per_rank;
  for (int p = 0; p < l.pp; ++p) per_rank.push_back(l.layers_on_stage(p));
  bool even = true;
  for (int n : per_rank) even &= (n == per_rank.front());
  if (even) return std::to_string(per_rank.front()) + " each";
  std::string out;
  for (size_t i = 0; i < per_rank.size(); ++i) out += (i ? "/" : "") + std::to_string(per_rank[i]);
  return out;
}

json InputsJson(const Inputs& in) {
  return json{{"cluster", in.cluster.name},
              {"cluster_gpus", in.cluster.total_gpus()},
              {"model", in.model.name},
              {"job", in.job.name},
              {"seq_len", in.job.seq_len},
              {"global_batch", in.job.global_batch},
              {"precision", Precisions(in.job)},
              {"trainer", Name(in.job.trainer)}};
}

}  // namespace

std::string IllegalLayoutText(const Layout& layout, const std::vector<Violation>& violations) {
  std::string out = "layout " + FormatLayout(layout) + " is illegal; it breaks " + std::to_string(violations.size()) +
                    " rule" + (violations.size() > 1 ? "s" : "") + ":";
  for (const auto& v : violations) out += "\n  " + std::string(Name(v.rule)) + ": " + v.detail;
  return out;
}

// Parses --layout against the world size (options it leaves out take the
// job's first candidates), fills the stage split, and checks legality; an
// illegal layout's error lists every rule it breaks.
Result<Layout> ResolveLayout(const std::string& text, int default_world, const LegalityContext& ctx) {
  auto parsed = ParseLayout(text, default_world, ctx.job);
  if (!parsed.ok()) return parsed.status();
  Layout layout = parsed.value();
  auto violations = CheckLayout(layout, ctx);
  if (!violations.empty()) return Status::Error(IllegalLayoutText(layout, violations) + "\n");
  if (ctx.model && !layout.explicit_stages) {
    layout.stage_layers = DescribePipeline(layout, *ctx.model, ctx.weights).StageLayers();
  }
  return layout;
}

Result<LayoutPins> ParsePins(const std::optional<std::string>& fix) {
  if (!fix) return LayoutPins{};
  if (fix->empty()) return Status::Error("--fix: empty; expected layout keys such as tp=2,pp=8");
  Result<LayoutPins> pins = ParseLayoutPins(*fix);
  if (!pins.ok()) return Status::Error("--fix " + *fix + ": " + pins.status().message());
  if (pins->empty()) return Status::Error("--fix " + *fix + ": no key given");
  return pins;
}

Result<TableFormat> ParseTableFormat(const std::string& format, bool json_flag) {
  const std::optional<TableFormat> f = format == "text"   ? std::optional(TableFormat::kText)
                                       : format == "json" ? std::optional(TableFormat::kJson)
                                       : format == "csv"  ? std::optional(TableFormat::kCsv)
                                                          : std::nullopt;
  if (!f) {
    return Status::Error("--format: expected text, json or csv, found \"" + format + "\"" +
                         DidYouMean(format, {"text", "json", "csv"}));
  }
  if (json_flag && *f == TableFormat::kCsv) return Status::Error("--json with --format csv: give one of them");
  return json_flag ? TableFormat::kJson : *f;
}

Status CheckLayoutText(const std::optional<std::string>& layout) {
  if (!layout) return Status();
  Result<LayoutPins> pins = ParseLayoutPins(*layout);
  return pins.ok() ? Status() : pins.status();
}

namespace {

// Heavy groups (TP, CP, EP, ETP) outside one NVLink domain are the main
// placement hazard; say so on stderr whatever the export format.
void WarnAboutStraddles(const RankMap& map, std::ostream& err) {
  const auto straddles = map.Straddles();
  if (straddles.empty()) return;
  err << "warning: " << straddles.size() << " heavy group" << (straddles.size() > 1 ? "s" : "")
      << " straddle NVLink domains";
  const Straddle& s = straddles.front();
  err << " (e.g. " << Name(s.kind) << " group " << s.group_index << ": ranks per domain ";
  for (size_t i = 0; i < s.ranks_per_domain.size(); ++i) err << (i ? "+" : "") << s.ranks_per_domain[i];
  err << ")";
  if (map.layout().placement == Placement::kLinear) err << "; placement=packed may keep them inside";
  err << "\n";
}

int WorldOf(const ClusterSpec& cluster, const JobSpec& job) {
  return job.world_size > 0 ? job.world_size : cluster.total_gpus();
}

}  // namespace

std::string InputsLine(const Inputs& in) {
  const bool part = in.job.world_size > 0 && in.job.world_size < in.cluster.total_gpus();
  return (in.recipe ? "recipe " + in.recipe->name + ": " : std::string()) + "cluster " + in.cluster.name + " (" +
         (part ? std::to_string(in.job.world_size) + " of " : std::string()) + std::to_string(in.cluster.total_gpus()) + " x " +
         in.cluster.gpu.name + "), model " + in.model.name + ", job " + in.job.name + " (seq " +
         std::to_string(in.job.seq_len) + ", global batch " + std::to_string(in.job.global_batch) +
         ", " + Precisions(in.job) + ")" +
         (in.job.trainer != Trainer::kMegatron ? std::string(", for ") + Name(in.job.trainer) : std::string());
}

namespace {

// The cluster file with --nodes applied; not yet cut to the job's
// gpus_per_domain (ApplyJobToCluster does that).
Result<ClusterSpec> LoadWholeCluster(const InputOptions& o) {
  auto cluster = LoadCluster(o.cluster.empty() ? kDefaultCluster : o.cluster);
  if (!cluster.ok()) return cluster.status();
  ClusterSpec c = cluster.value();
  if (o.nodes) {
    // --nodes is in [1, kMaxNodes] (CheckInputFlags); the cluster file's rule
    // on nodes x gpus_per_node applies to the product it forms.
    const std::optional<int64_t> gpus = CheckedProduct({*o.nodes, c.gpus_per_node});
    if (!gpus) {
      return Status::Error("--nodes " + std::to_string(*o.nodes) + ": " + std::to_string(*o.nodes) + " x " +
                           std::to_string(c.gpus_per_node) + " GPUs per node is more than the largest world, " +
                           std::to_string(kMaxWorldSize) + " GPUs");
    }
    c.nodes = *o.nodes;
    if (c.total_gpus() % c.nvlink_domain_gpus != 0) {
      return Status::Error("--nodes " + std::to_string(*o.nodes) + ": " +
                           std::to_string(c.total_gpus()) + " GPUs do not fill whole " +
                           std::to_string(c.nvlink_domain_gpus) + "-GPU NVLink domains");
    }
    c.name += " (" + std::to_string(*o.nodes) + " nodes)";
  }
  return c;
}

}  // namespace

Status CheckInputFlags(const InputOptions& o) {
  if (!o.recipe.empty()) {
    // The flags that would name other inputs than the recipe's.
    const std::pair<bool, const char*> conflicts[] = {
        {!o.cluster.empty(), "--cluster"}, {!o.model.empty(), "--model"},       {!o.job.empty(), "--job"},
        {o.gpus.has_value(), "--gpus"},    {o.nodes.has_value(), "--nodes"}, {o.gpus_per_domain.has_value(), "--gpus-per-domain"}};
    for (const auto& [given, flag] : conflicts) {
      if (given) return Status::Error(std::string(flag) + " with --recipe: the recipe names its cluster, GPUs, model and job");
    }
  }
  if (Status s = CheckIntFlag("--nodes", o.nodes, 1, kMaxNodes); !s.ok()) return s;
  // Every job override on its own: ranges, names, repeats.
  JobSpec blank;
  return ApplyJobOverrides(o, &blank);
}

// The inputs a recipe names (CheckInputFlags refused the flags that would
// name others).
Result<Inputs> LoadRecipeInputs(const InputOptions& o) {
  Result<RecipeSpec> recipe = LoadRecipe(o.recipe);
  if (!recipe.ok()) return recipe.status();
  Inputs in{recipe->cluster, recipe->model, recipe->job, recipe.value(), {}};
  return in;
}

Result<Inputs> LoadInputs(const InputOptions& o) {
  if (Status s = CheckInputFlags(o); !s.ok()) return s;  // the commands answered 2 for it already
  Inputs in;
  if (!o.recipe.empty()) {
    auto r = LoadRecipeInputs(o);
    if (!r.ok()) return r.status();
    in = std::move(r).value();
  } else {
    auto base = LoadWholeCluster(o);
    if (!base.ok()) return base.status();
    auto model = LoadModel(o.model.empty() ? kDefaultModel : o.model);
    if (!model.ok()) return model.status();
    auto job = LoadJob(o.job.empty() ? kDefaultJob : o.job);
    if (!job.ok()) return job.status();
    in = Inputs{base.value(), model.value(), job.value(), std::nullopt, {}};
  }
  if (!o.calibration.empty()) in.cluster.calibration = o.calibration;
  in.calibration_use.allow_other_gpu = o.force_calibration;
  if (Status s = ApplyJobOverrides(o, &in.job); !s.ok()) return s;
  // What the trainer runs that the job does not list (torchtitan's ring CP
  // and FSDP2, OLMo-core's HSDP): its rules then refuse the rest.
  in.job = JobForTrainer(in.job);
  ApplyJobToModel(in.job, &in.model);
  if (Status s = ApplyJobToCluster(in.job, GpusPerDomainOrigin(o, in.job, in.recipe), &in.cluster); !s.ok()) return s;
  // What the job leaves to the cluster (the dispatchers of a job file
  // without "dispatcher"; inputs/job.h ClusterDispatchers says the rule),
  // decided on the cluster as cut, for the job's world.
  in.job = JobForCluster(in.job, in.cluster);
  // A precision recipe the GPU cannot run is a mistake in the request, not a
  // candidate to rule out quietly.
  for (Precision p : in.job.precisions) {
    if (const std::string why = rules::PrecisionProblem(in.cluster.gpu, p); !why.empty()) {
      return Status::Error(std::string("precision ") + Name(p) + " (" +
                           (o.precision ? "--precision" : JobFieldOrigin(in.job, in.recipe, "precision")) + ") on cluster " +
                           in.cluster.name + ": " + why);
    }
  }
  if (const std::string why = rules::AttentionBackendProblem(in.cluster.gpu, in.model, in.job.attention_backend);
      !why.empty()) {
    return Status::Error(std::string("attention_backend ") + Name(in.job.attention_backend) + " (" +
                         (o.attention_backend ? "--attention-backend"
                                              : JobFieldOrigin(in.job, in.recipe, "attention_backend")) +
                         ") on cluster " + in.cluster.name + ": " + why);
  }
  return in;
}

void WarnAboutCalibrationGpu(const CommParams& params, const ClusterSpec& cluster, std::ostream& err) {
  if (params.calibrated_gpu.empty() || SameGpu(params.calibrated_gpu, cluster.gpu.name)) return;
  err << "warning: calibration " << params.source << " was made on \"" << params.calibrated_gpu
      << "\", not the cluster's \"" << cluster.gpu.name << "\"; used as --force-calibration asks\n";
}

void WarnAboutFitMisses(const CommParams& params, std::ostream& err) {
  if (!params.misses) return;
  for (const auto& [collective, placement] : params.misses->List()) {
    err << "warning: calibration " << params.source << " has no fit for " << Name(collective) << " on "
        << Name(placement) << " groups of the sizes costed; the defaults (NCCL's model) were used there\n";
  }
  for (const auto& [collective, placement] : params.misses->ListBeyond()) {
    err << "warning: calibration " << params.source << ": the fit for " << Name(collective) << " on "
        << Name(placement) << " groups was used past the largest size it measured, its fastest segment extended\n";
  }
}

namespace {

// `text` in lines of at most `width` characters (a longer word alone),
// each after `indent`.
std::string Wrapped(const std::string& text, size_t width, const std::string& indent) {
  std::string out, line;
  size_t at = 0;
  while (at < text.size()) {
    const size_t space = std::min(text.find(' ', at), text.size());
    const std::string word = text.substr(at, space - at);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    at = space + 1;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

}  // namespace

int RunList(const ListOptions& options, std::ostream& out, std::ostream& err) {
  constexpr InputKind kKinds[] = {InputKind::kCluster, InputKind::kModel, InputKind::kJob, InputKind::kRecipe};
  std::vector<InputKind> kinds;
  for (const std::string& c : options.category) {
    std::vector<std::string> names;
    std::optional<InputKind> found;
    for (InputKind kind : kKinds) {
      names.push_back(std::string(Name(kind)) + "s");
      if (c == Name(kind) || c == names.back()) found = kind;
    }
    if (!found) {
      return Usage(err, Status::Error("list: unknown category \"" + c + "\"" + DidYouMean(c, names) +
                                      " (the categories: clusters, models, jobs, recipes)"));
    }
    if (std::find(kinds.begin(), kinds.end(), *found) == kinds.end()) kinds.push_back(*found);
  }
  if (kinds.empty()) kinds.assign(std::begin(kKinds), std::end(kKinds));
  json all = json::object();
  all["schema"] = kListSchema;
  all["data_dir"] = DataDir();
  std::string text = "Shipped inputs (" + DataDir() + "):\n";
  bool cut = false;  // a description was cut short
  for (InputKind kind : kinds) {
    auto shipped = ListShipped(kind);
    if (!shipped.ok()) return Fail(err, shipped.status());
    TextTable table({std::string(Name(kind)) + "s", "what"});
    std::string long_text = "\n" + std::string(Name(kind)) + "s:\n";
    json items = json::array();
    for (const auto& s : shipped.value()) {
      std::string what = s.description;
      if (kind == InputKind::kCluster) {
        if (auto c = LoadCluster(s.path); c.ok()) {
          what = std::to_string(c->total_gpus()) + " x " + c->gpu.name + ", NVLink domain " +
                 std::to_string(c->nvlink_domain_gpus) + "; " + what;
        }
      } else if (kind == InputKind::kModel) {
        if (auto m = LoadModel(s.path); m.ok()) {
          char params[64];
          std::snprintf(params, sizeof params, "%.1fB params, %.1fB active",
                        m->total_params() / 1e9, m->active_params() / 1e9);
          what = std::string(params) + "; " + what;
        }
      } else if (kind == InputKind::kRecipe) {
        if (auto r = LoadRecipe(s.path); r.ok()) {
          what = std::to_string(r->gpus) + " of " + r->cluster_name + ", " + r->model_name + ": " + r->layout;
          for (RecipeFeature f : r->not_modelled) what += std::string(" [not modelled: ") + Name(f) + "]";
        }
      }
      items.push_back({{"name", s.name}, {"path", s.path}, {"description", s.description}});
      if (options.long_descriptions) {
        // A recipe's summary, then its own description.
        if (kind == InputKind::kRecipe && !s.description.empty()) what += "; " + s.description;
        long_text += "  " + s.name + "\n" + Wrapped(what, 96, "      ");
        continue;
      }
      if (what.size() > kListDescriptionChars) {
        what = what.substr(0, kListDescriptionChars - 3) + "...";
        cut = true;
      }
      table.AddRow({s.name, what});
    }
    all[std::string(Name(kind)) + "s"] = items;
    text += options.long_descriptions ? long_text : "\n" + table.Render("  ");
  }
  if (cut) {
    text += "\n(descriptions cut to " + std::to_string(kListDescriptionChars) +
            " characters; `foldplan list --long` prints them whole)\n";
  }
  out << (options.json ? all.dump(2) + "\n" : text);
  return 0;
}

Result<ClusterSpec> LoadClusterAlone(const InputOptions& options) {
  auto cluster = LoadWholeCluster(options);
  if (!cluster.ok()) return cluster.status();
  // No job file: the job is the flags' (--gpus-per-domain).
  JobSpec job;
  if (Status s = ApplyJobOverrides(options, &job); !s.ok()) return s;
  ClusterSpec c = cluster.value();
  if (Status s = ApplyJobToCluster(job, GpusPerDomainOrigin(options, job, std::nullopt), &c); !s.ok()) return s;
  if (!options.calibration.empty()) c.calibration = options.calibration;
  return c;
}

int RunTopo(const TopoOptions& options, std::ostream& out, std::ostream& err) {
  if (Status s = CheckInputFlags(options.inputs); !s.ok()) return Usage(err, s);
  auto cluster = LoadClusterAlone(options.inputs);
  if (!cluster.ok()) return Fail(err, cluster.status());
  auto topo = Topology::Build(cluster.value());
  if (!topo.ok()) return Fail(err, topo.status());
  out << (options.json ? TopologySummaryJson(topo.value()) : TopologySummaryText(topo.value()));
  return 0;
}

namespace {

// enumerate --format csv (doc/formats.md, "CSV"): the layouts shown, one
// record each, the columns of the text table.
std::string EnumerationCsv(const std::vector<Layout>& layouts) {
  std::string out = CsvRecord({"index", "layout", "tp", "cp", "dp", "pp", "vpp", "ep", "etp", "edp", "mbs", "order",
                               "cp_style", "recompute", "placement", "dispatcher", "precision", "recipe",
                               "layers_per_stage"});
  for (size_t i = 0; i < layouts.size(); ++i) {
    const Layout& l = layouts[i];
    out += CsvRecord({std::to_string(i + 1), FormatLayout(l), std::to_string(l.tp), std::to_string(l.cp),
                      std::to_string(l.dp), std::to_string(l.pp), std::to_string(l.vpp), std::to_string(l.ep),
                      std::to_string(l.etp), std::to_string(l.edp), std::to_string(l.mbs), l.order, Name(l.cp_style),
                      Name(l.recompute), Name(l.placement), Name(l.dispatcher), Name(l.precision), ShortRecipe(l),
                      StagesText(l)});
  }
  return out;
}

}  // namespace

int RunEnumerate(const EnumerateOptionsCli& options, std::ostream& out, std::ostream& err) {
  if (Status s = CheckInputFlags(options.inputs); !s.ok()) return Usage(err, s);
  if (options.limit < 0) {
    return Usage(err, Status::Error("--limit: expected 0 (all) or a positive count, found " +
                                    std::to_string(options.limit)));
  }
  if (Status s = CheckLayoutText(options.layout); !s.ok()) return Usage(err, s);
  auto format = ParseTableFormat(options.format, options.json);
  if (!format.ok()) return Usage(err, format.status());
  const bool json_out = format.value() == TableFormat::kJson;
  auto pins = ParsePins(options.fix);
  if (!pins.ok()) return Usage(err, pins.status());
  auto inputs = LoadInputs(options.inputs);
  if (!inputs.ok()) return Fail(err, inputs.status());
  Inputs in = inputs.value();
  in.job = PinnedJob(in.job, *pins);
  // The cost model weighs the blocks of pipeline layouts it chooses.
  auto cost = CostModel::Create(in.cluster, in.model, in.job, in.calibration_use);
  if (!cost.ok()) return Fail(err, cost.status());
  const LegalityContext ctx = cost.value()->legality();

  if (options.layout) {
    auto layout = ResolveLayout(*options.layout, WorldOf(in.cluster, in.job), ctx);
    if (!layout.ok()) return Fail(err, layout.status());
    if (format.value() == TableFormat::kCsv) {
      out << EnumerationCsv({layout.value()});
    } else if (json_out) {
      out << json{{"schema", kEnumerationSchema}, {"inputs", InputsJson(in)},
                  {"legal", true}, {"layout", LayoutToJson(layout.value())}}.dump(2) << "\n";
    } else {
      const Layout& l = layout.value();
      const bool chosen = !l.explicit_stages && NeedsChosenLayout(in.model.layers, l.pp, l.vpp);
      out << InputsLine(in) << "\n" << "legal: " << FormatLayout(l) << "\n"
          << "layers per pipeline stage: " << StagesText(l) << "\n"
          << "pipeline layout: " << DescribePipeline(l, in.model, ctx.weights).LayoutText()
          << (chosen ? " (chosen: the layers do not divide over pp x vpp)" : "") << "\n";
    }
    return 0;
  }

  // Only the layouts shown are kept (the first --limit, or all with 0):
  // a widened job's legal set can be millions of layouts.
  EnumerateOptions enumerate;
  enumerate.pins = &*pins;
  enumerate.collect_layouts = false;
  std::vector<Layout> shown_layouts;
  enumerate.visit = [&](const Layout& l) {
    if (options.limit <= 0 || shown_layouts.size() < static_cast<size_t>(options.limit)) shown_layouts.push_back(l);
  };
  const Enumeration e = EnumerateLayouts(ctx, enumerate);
  if (format.value() == TableFormat::kCsv) {
    out << EnumerationCsv(shown_layouts);
    return 0;
  }
  if (json_out) {
    json rejected = json::object();
    for (int r = 0; r < kRuleCount; ++r) rejected[Name(Rule(r))] = e.rejected[r];
    json layouts = json::array();
    for (const auto& l : shown_layouts) layouts.push_back(LayoutToJson(l));
    out << json{{"schema", kEnumerationSchema},
                {"inputs", InputsJson(in)},
                {"world", e.world},
                {"candidates", e.candidates},
                {"legal_count", e.legal_count},
                {"rejected", rejected},
                {"layouts", layouts}}
               .dump(2)
        << "\n";
    return 0;
  }

  out << InputsLine(in) << "\n";
  out << "world " << e.world << ": " << WithCommas(e.candidates) << " candidates, "
      << WithCommas(e.legal_count) << " legal\n";
  if (options.why) {
    TextTable table({"rule", "rejected", "statement"}, {Align::kLeft, Align::kRight, Align::kLeft});
    for (int r = 0; r < kRuleCount; ++r) {
      table.AddRow({Name(Rule(r)), WithCommas(e.rejected[r]), Info(Rule(r)).statement});
    }
    table.AddRow({"legal", WithCommas(e.legal_count), ""});
    table.AddRow({"total", WithCommas(e.candidates), ""});
    out << "\nRejections (each candidate under the first rule it breaks):\n" << table.Render("  ");
  }
  TextTable table({"#", "tp", "cp", "dp", "pp", "vpp", "ep", "etp", "edp", "mbs", "order", "cp_style",
                   "recompute", "placement", "recipe", "layers/stage"},
                  {Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight,
                   Align::kRight, Align::kRight, Align::kRight, Align::kRight, Align::kRight});
  size_t shown = 0;
  for (const auto& l : shown_layouts) {
    ++shown;
    table.AddRow({std::to_string(shown), std::to_string(l.tp), std::to_string(l.cp),
                  std::to_string(l.dp), std::to_string(l.pp), std::to_string(l.vpp),
                  std::to_string(l.ep), std::to_string(l.etp), std::to_string(l.edp),
                  std::to_string(l.mbs), l.order, l.cp > 1 ? Name(l.cp_style) : "-",
                  Name(l.recompute), Name(l.placement), ShortRecipe(l).empty() ? "-" : ShortRecipe(l),
                  StagesText(l)});
  }
  if (shown > 0) out << "\n" << table.Render("  ");
  if (shown < e.legal_count) {
    out << "  ... " << WithCommas(e.legal_count - shown) << " more (--limit 0 shows all)\n";
  }
  return 0;
}

int RunRanks(const RanksOptions& options, std::ostream& out, std::ostream& err) {
  // A launcher format (planner/launch_files.h), else a trainer export.
  const std::optional<LaunchFormat> launch = LaunchFormatNamed(options.format);
  Result<ExportFormat> format = ExportFormat{};
  if (!launch) {
    format = ParseExportFormat(options.format);
    if (!format.ok()) {
      std::vector<std::string> names = ChoiceNames(kLaunchFormatChoices);
      for (int i = 0; i < kExportFormatCount; ++i) names.push_back(Name(static_cast<ExportFormat>(i)));
      return Usage(err, Status::Error(format.status().message() + "; or a launcher format, " +
                                      kLaunchFormatChoices + ", with --hosts FILE" +
                                      DidYouMean(options.format, names)));
    }
  }
  if (launch && options.hosts.empty()) {
    return Usage(err, Status::Error(std::string("--format ") + Name(*launch) +
                                    " needs --hosts FILE: the host names, one per line in node order"));
  }
  if (!launch && !options.hosts.empty()) {
    return Usage(err, Status::Error(std::string("--hosts is for the launcher formats (") + kLaunchFormatChoices +
                                    "), not --format " + options.format));
  }
  const bool from_plan = !options.plan.empty();
  if (options.candidate && !from_plan) return Usage(err, Status::Error("--candidate needs --plan FILE"));
  if (options.candidate) {
    if (Status s = CheckCandidateNumber("--candidate", *options.candidate); !s.ok()) return Usage(err, s);
  }
  if (from_plan && (options.layout || !options.inputs.recipe.empty() || options.world_size)) {
    return Usage(err, Status::Error("--plan with --layout, --recipe or --world-size: the plan names its inputs and "
                                    "layouts (choose one with --candidate N)"));
  }
  if (!options.layout && options.inputs.recipe.empty() && !from_plan) {
    return Usage(err, Status::Error("ranks needs --layout (or --recipe, whose layout it exports, or --plan FILE)"));
  }
  if (options.world_size && !options.inputs.recipe.empty()) {
    return Usage(err, Status::Error("--world-size with --recipe: the recipe names its cluster and GPUs"));
  }
  // Checked before the generic cluster of that many GPUs is built.
  if (Status s = CheckIntFlag("--world-size", options.world_size, 1, kMaxWorldSize); !s.ok()) return Usage(err, s);
  if (Status s = CheckInputFlags(options.inputs); !s.ok()) return Usage(err, s);
  if (Status s = CheckLayoutText(options.layout); !s.ok()) return Usage(err, s);

  ClusterSpec cluster;
  JobSpec j;
  std::optional<ModelSpec> model;
  std::string layout_text = options.layout.value_or("");
  std::string unmodelled;  // "; recipe R uses F, which foldplan does not model"
  if (from_plan) {
    // The plan's own inputs, as written (simulate --plan reads them so too).
    auto plan = LoadPlanFile(options.plan, options.candidate.value_or(1));
    if (!plan.ok()) return Fail(err, plan.status());
    cluster = plan->cluster;
    j = plan->job;
    model = plan->model;
    layout_text = plan->layout_text;
  } else if (!options.inputs.recipe.empty()) {
    // A recipe names everything: cluster, GPUs, model, job and its layout.
    auto in = LoadInputs(options.inputs);
    if (!in.ok()) return Fail(err, in.status());
    cluster = in->cluster;
    j = in->job;
    model = in->model;
    if (!options.layout) layout_text = in->recipe->layout;
    for (RecipeFeature f : in->recipe->not_modelled) {
      unmodelled += std::string(unmodelled.empty() ? "; recipe " + in->recipe->name + " uses " : " and ") + Name(f);
    }
    if (!unmodelled.empty()) unmodelled += ", which foldplan does not model";
  } else {
    if (options.world_size) {
      cluster = GenericCluster(*options.world_size);
    } else {
      auto c = LoadWholeCluster(options.inputs);
      if (!c.ok()) return Fail(err, c.status());
      cluster = c.value();
    }
    auto job = LoadJob(options.inputs.job.empty() ? kDefaultJob : options.inputs.job);
    if (!job.ok()) return Fail(err, job.status());
    j = job.value();
    if (Status s = ApplyJobOverrides(options.inputs, &j); !s.ok()) return Fail(err, s);
    // The job's gpus_per_domain holds with or without --model.
    const std::string origin = GpusPerDomainOrigin(options.inputs, j, std::nullopt);
    if (Status s = ApplyJobToCluster(j, origin, &cluster); !s.ok()) return Fail(err, s);
    if (options.model_given) {
      auto m = LoadModel(options.inputs.model);
      if (!m.ok()) return Fail(err, m.status());
      model = m.value();
      ApplyJobToModel(j, &*model);
    }
  }
  // Degrees alone get the degree, order and placement rules; --model adds
  // the model's rules, and --model or --job the sequence and batch rules.
  const bool job_rules = model.has_value() || !options.inputs.job.empty();
  std::unique_ptr<CostModel> cost;  // weighs the blocks of a pipeline layout it chooses
  if (model) {
    auto made = CostModel::Create(cluster, *model, j);
    if (!made.ok()) return Fail(err, made.status());
    cost = std::move(made).value();
  }
  const LegalityContext ctx{&cluster, model ? &*model : nullptr, job_rules ? &j : nullptr,
                            cost ? &cost->pipeline_weights() : nullptr};
  auto layout = ResolveLayout(layout_text, WorldOf(cluster, j), ctx);
  if (!layout.ok()) return Fail(err, layout.status());
  // With a model, the memory model judges it (costmodel/layout_verdict.h):
  // a layout that does not fit is refused, or with --force exported with
  // the warning and the rank map JSON marked (`fits`, the peak).
  nlohmann::ordered_json verdict_fields;
  if (cost) {
    const LayoutVerdict verdict = JudgeLayout(cost->Evaluate(layout.value()));
    if (!verdict.runs()) {
      const std::string why = "layout " + ShortDegrees(layout.value()) + " " + VerdictProblems(verdict) + unmodelled;
      if (!options.force) return Fail(err, Status::Error(why + " (--force exports it anyway)"));
      err << "warning: " << why << " (exported as --force asks)\n";
      verdict_fields = VerdictJson(verdict);
    }
  }
  // The model's tied or untied embeddings and MTP stages decide the embedding groups.
  auto map = BuildRankMap(layout.value(), cluster, RankMapOptionsFor(model ? &*model : nullptr));
  if (!map.ok()) return Fail(err, map.status());
  WarnAboutStraddles(map.value(), err);
  if (!model) {
    err << "note: no --model: the model's rules were not checked (heads, KV heads and FFN widths divisible by "
           "tp, Ulysses heads by cp, experts by ep, expert FFN by etp, the pipeline split), nor its memory\n";
  }
  if (launch) {
    auto hosts = ReadHostList(options.hosts);
    if (!hosts.ok()) return Fail(err, hosts.status());
    const LaunchPlacement placement = LaunchPlacementOf(map.value());
    auto assignment = AssignHosts(placement, hosts.value(), options.hosts);
    if (!assignment.ok()) return Fail(err, assignment.status());
    auto text = LaunchFileText(assignment.value(), placement, *launch);
    if (!text.ok()) return Fail(err, text.status());
    if (Status s = WriteOrPrint(text.value(), options.output, out, err); !s.ok()) return Fail(err, s);
    err << "note: run it as "
        << LaunchHint(assignment.value(), *launch, options.output.empty() ? "FILE" : options.output, placement.env)
        << "\n";
    return 0;
  }
  const ExportContext export_ctx{&cluster, model ? &*model : nullptr, &j,
                                  verdict_fields.empty() ? nullptr : &verdict_fields};
  auto text = ExportRankMap(map.value(), format.value(), export_ctx);
  if (!text.ok()) return Fail(err, text.status());
  if (Status s = WriteOrPrint(text.value(), options.output, out, err); !s.ok()) return Fail(err, s);
  return 0;
}

}  // namespace foldplan
