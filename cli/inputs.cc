// The inputs every command loads (cli/inputs.h).
#include "cli/inputs.h"

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/nearest_name.h"
#include "inputs/checked_product.h"
#include "inputs/loader.h"
#include "planner/pipeline.h"
#include "planner/trainer_rules.h"

namespace foldplan {

Status CheckIntFlag(const char* flag, const std::optional<int>& value, int64_t lo, int64_t hi) {
  if (!value || (*value >= lo && *value <= hi)) return Status();
  return Status::Error(std::string(flag) + ": expected an integer in [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "], found " + std::to_string(*value));
}

namespace {

using json = nlohmann::ordered_json;

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

std::string InputsLine(const Inputs& in) {
  const bool part = in.job.world_size > 0 && in.job.world_size < in.cluster.total_gpus();
  return (in.recipe ? "recipe " + in.recipe->name + ": " : std::string()) + "cluster " + in.cluster.name + " (" +
         (part ? std::to_string(in.job.world_size) + " of " : std::string()) + std::to_string(in.cluster.total_gpus()) + " x " +
         in.cluster.gpu.name + "), model " + in.model.name + ", job " + in.job.name + " (seq " +
         std::to_string(in.job.seq_len) + ", global batch " + std::to_string(in.job.global_batch) +
         ", " + Precisions(in.job) + ")" +
         (in.job.trainer != Trainer::kMegatron ? std::string(", for ") + Name(in.job.trainer) : std::string());
}

nlohmann::ordered_json InputsJson(const Inputs& in) {
  return nlohmann::ordered_json{{"cluster", in.cluster.name},
              {"cluster_gpus", in.cluster.total_gpus()},
              {"model", in.model.name},
              {"job", in.job.name},
              {"seq_len", in.job.seq_len},
              {"global_batch", in.job.global_batch},
              {"precision", Precisions(in.job)},
              {"trainer", Name(in.job.trainer)}};
}


int WorldOf(const ClusterSpec& cluster, const JobSpec& job) {
  return job.world_size > 0 ? job.world_size : cluster.total_gpus();
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

Result<InputsModelOptional> LoadInputsModelOptional(const InputOptions& o, std::optional<int> world_size,
                                                    bool with_model) {
  InputsModelOptional in;
  if (world_size) {
    in.cluster = GenericCluster(*world_size);
  } else {
    auto c = LoadWholeCluster(o);
    if (!c.ok()) return c.status();
    in.cluster = c.value();
  }
  auto job = LoadJob(o.job.empty() ? kDefaultJob : o.job);
  if (!job.ok()) return job.status();
  in.job = job.value();
  if (Status s = ApplyJobOverrides(o, &in.job); !s.ok()) return s;
  // The job's gpus_per_domain holds with or without a model.
  const std::string origin = GpusPerDomainOrigin(o, in.job, std::nullopt);
  if (Status s = ApplyJobToCluster(in.job, origin, &in.cluster); !s.ok()) return s;
  if (with_model) {
    auto m = LoadModel(o.model);
    if (!m.ok()) return m.status();
    in.model = m.value();
    ApplyJobToModel(in.job, &*in.model);
  }
  return in;
}

}  // namespace foldplan
