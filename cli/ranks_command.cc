// foldplan ranks (cli/ranks_command.h).
#include "cli/ranks_command.h"

#include <memory>

#include <nlohmann/json.hpp>

#include "cli/output.h"
#include "cli/usage_errors.h"
#include "core/nearest_name.h"
#include "costmodel/evaluate.h"
#include "costmodel/layout_verdict.h"
#include "costmodel/plan_file.h"
#include "planner/launch_files.h"
#include "planner/rank_export.h"
#include "planner/rank_map.h"
#include "planner/trainer_rules.h"

namespace foldplan {
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

}  // namespace

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
    auto in = LoadInputsModelOptional(options.inputs, options.world_size, options.model_given);
    if (!in.ok()) return Fail(err, in.status());
    cluster = std::move(in->cluster);
    j = std::move(in->job);
    model = std::move(in->model);
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
