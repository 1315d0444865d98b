#include "costmodel/plan_file.h"

#include "core/json_check.h"
#include "inputs/loader.h"
#include "inputs/serialize.h"
#include "planner/layout_json.h"
#include "planner/rank_export.h"
#include "planner/rank_map.h"

namespace foldplan {

using Json = nlohmann::ordered_json;

namespace {

Json StepJson(const StepBreakdown& s) {
  return Json{{"microbatches", s.microbatches},
              {"slowest_stage", s.slowest_stage},
              {"stage_compute_s", s.stage_compute_s},
              {"stage_exposed_comm_s", s.stage_exposed_comm_s},
              {"stage_time_s", s.stage_time_s},
              {"pipeline_s", s.pipeline_s},
              {"bubble_s", s.bubble_s},
              {"dp_exposed_s", s.dp_exposed_s},
              {"optimizer_s", s.optimizer_s},
              {"stage_host_s", s.stage_host_s},
              {"stage_host_exposed_s", s.stage_host_exposed_s},
              {"stage_launches", s.stage_launches},
              {"stage_syncs", s.stage_syncs},
              {"host_step_s", s.host_step_s},
              {"model_flops_per_token", s.model_flops_per_token},
              {"model_flops_per_token_full_attention", s.model_flops_per_token_full_attention},
              {"mfu_full_attention", s.mfu_full_attention}};
}

Json MemoryJson(const MemoryBreakdown& m) {
  Json terms = Json::object();
  for (const auto& t : m.terms) terms[t.name] = {{"gib", t.bytes / kBytesPerGiB}, {"note", t.note}};
  return Json{{"terms", terms},
              {"peak_gib", m.peak_gib()},
              {"hbm_gib", m.hbm_gib},
              {"fits", m.fits},
              {"worst_stage", m.worst_stage},
              {"inflight_microbatches", m.inflight_microbatches}};
}

}  // namespace

Result<std::vector<std::string>> MegatronArguments(const Layout& layout, const ClusterSpec& cluster,
                                                   const ModelSpec* model, const JobSpec* job) {
  auto map = BuildRankMap(layout, cluster, RankMapOptionsFor(model));
  if (!map.ok()) return map.status();
  // ExportRankMap's check before any export.
  if (Status s = CheckRankMapInvariants(map.value()); !s.ok()) return s;
  return MegatronArgs(map.value(), {&cluster, model, job});
}

Json CandidateJson(const Evaluation& e) {
  Json comm = Json::object();
  for (const auto& c : e.comm) comm[c.name] = {{"total_s", c.total_s}, {"exposed_s", c.exposed_s}};
  Json violations = Json::array();
  for (const auto& v : e.violations) violations.push_back({{"rule", Name(v.rule)}, {"detail", v.detail}});
  Json per_rank = Json::array();
  for (const PipelineRank& r : e.pipeline.ranks) per_rank.push_back(r.layers);
  const Json pipeline = {{"schedule", Name(e.pipeline.schedule)},
                         {"pp_layout", e.pipeline.LayoutText()},
                         {"chosen", e.pipeline_chosen},
                         {"layers_per_rank", per_rank}};
  // The host per pipeline rank and micro-batch (host_time.h).
  Json host = Json::array();
  for (const StageHost& h : e.host) {
    host.push_back({{"host_s", h.host_s}, {"exposed_s", h.exposed_s}, {"launches", h.launches}, {"syncs", h.syncs}});
  }
  return Json{{"layout", LayoutToJson(e.layout)},
              {"pipeline", pipeline},
              {"step_time_s", e.step.step_time_s},
              {"tokens_per_s", e.step.tokens_per_s},
              {"mfu", e.step.mfu},
              {"mfu_precision_peak", e.step.mfu_precision_peak},
              {"tflops_per_gpu", e.step.tflops_per_gpu},
              {"step", StepJson(e.step)},
              {"host_per_stage", host},
              {"memory", MemoryJson(e.memory)},
              {"comm", comm},
              {"violations", violations}};
}

Result<std::string> PlanFileJson(const PlanFileContents& c) {
  const CostContext& ctx = c.model->context();
  Json out;
  out["schema"] = kPlanSchema;
  out["objective"] = c.objective;
  out["mfu_convention"] =
      "model FLOPs per token (6 x matmul parameters touched + causal attention, flops.h) x "
      "tokens/s / (GPUs x dense bf16 peak); step.mfu_full_attention counts attention without the "
      "causal halving, as Megatron did before core v0.12";
  out["inputs"] = {{"cluster", {{"name", ctx.cluster->name}, {"spec", ToJson(*ctx.cluster)}}},
                   {"model", {{"name", ctx.model->name}, {"spec", ToJson(*ctx.model)}}},
                   {"job", {{"name", ctx.job->name}, {"spec", ToJson(*ctx.job)}}},
                   {"compute_profile", c.model->profile().gpu()},
                   {"calibration", c.model->comm_params().source}};
  if (c.enumeration) {
    Json rejected = Json::object();
    for (int r = 0; r < kRuleCount; ++r) rejected[Name(Rule(r))] = c.enumeration->rejected[r];
    out["search"] = {{"world", c.enumeration->world},
                     {"candidates", c.enumeration->candidates},
                     {"legal_and_fitting", c.enumeration->legal_count},
                     {"rejected", rejected}};
  }
  Json candidates = Json::array();
  for (const auto& e : c.candidates) candidates.push_back(CandidateJson(e));
  out["candidates"] = candidates;
  if (c.recipe) {
    const bool ranked = c.recipe->violations.empty() && c.recipe->memory.fits;
    out["recipe"] = {{"name", ctx.job->name},
                     {"candidate", CandidateJson(*c.recipe)},
                     {"rank", ranked ? Json(c.recipe_rank) : Json(nullptr)}};
  }
  out["rank_map"] = nullptr;
  if (!c.candidates.empty()) {
    // The model's tied or untied embeddings and MTP stages decide the embedding groups.
    auto map = BuildRankMap(c.candidates.front().layout, *ctx.cluster, RankMapOptionsFor(ctx.model));
    Result<std::string> text = map.ok() ? ExportRankMap(map.value(), ExportFormat::kRankMap,
                                                        {ctx.cluster, ctx.model, ctx.job})
                                        : Result<std::string>(map.status());
    if (text.ok()) out["rank_map"] = Json::parse(text.value());
    else out["rank_map_error"] = text.status().message();
    // The Megatron-LM arguments the best layout relies on, or why it has none.
    Result<std::vector<std::string>> args = MegatronArguments(c.candidates.front().layout, *ctx.cluster,
                                                              ctx.model, ctx.job);
    if (args.ok()) out["megatron_args"] = args.value();
    else out["megatron_error"] = args.status().message();
  }
  return out.dump(1) + "\n";
}

Status CheckCandidateNumber(const std::string& flag, long long number) {
  if (number >= 1) return Status();
  return Status::Error(flag + ": candidates are numbered from 1 (#1 the best), found " + std::to_string(number));
}

Result<PlanFileInputs> LoadPlanFile(const std::string& path, int number) {
  auto doc = ParseJsonFile(path);
  if (!doc.ok()) return doc.status();
  JsonErrors errors(path);
  CheckedObject root(doc.value(), "", &errors);
  root.Enum("schema", {kPlanSchema});
  CheckedObject inputs = root.Object("inputs");
  if (!errors.empty()) return errors.status();
  PlanFileInputs out;
  // One embedded input: its name from the plan, its spec through the
  // input's own reader, whose errors name the spec's place in the plan.
  auto spec = [&](const char* key, auto parse, auto* value) -> Status {
    CheckedObject entry = inputs.Object(key);
    const std::string name = entry.String("name");
    if (!entry.Has("spec")) entry.Object("spec");  // records the missing field
    if (!errors.empty()) return errors.status();
    auto parsed = parse(entry.Raw("spec"), path + " " + entry.Pointer("spec"));
    if (!parsed.ok()) return parsed.status();
    *value = std::move(parsed).value();
    value->name = name;
    return Status();
  };
  if (Status s = spec("cluster", &ParseCluster, &out.cluster); !s.ok()) return s;
  if (Status s = spec("model", &ParseModel, &out.model); !s.ok()) return s;
  if (Status s = spec("job", &ParseJob, &out.job); !s.ok()) return s;
  // The plan wrote the calibration path already resolved (ParseCluster
  // would resolve it again, against the plan's directory).
  out.cluster.calibration = doc.value()["inputs"]["cluster"]["spec"].value("calibration", std::string());

  if (!root.Has("candidates")) root.Object("candidates");
  if (!errors.empty()) return errors.status();
  const nlohmann::json& candidates = root.Raw("candidates");
  if (!candidates.is_array() || candidates.empty()) {
    errors.Add("/candidates", "expected a non-empty list of candidates");
    return errors.status();
  }
  if (number < 1 || static_cast<size_t>(number) > candidates.size()) {
    errors.Add("/candidates", "expected a candidate #" + std::to_string(number) + " (the file has " +
                                  std::to_string(candidates.size()) + ", numbered from 1)");
    return errors.status();
  }
  const size_t index = static_cast<size_t>(number - 1);
  const std::string pointer = "/candidates/" + std::to_string(index);
  CheckedObject best(candidates[index], pointer, &errors);
  CheckedObject layout = best.Object("layout");
  out.layout_text = layout.String("text");
  if (!errors.empty()) return errors.status();
  const int world = out.job.world_size > 0 ? out.job.world_size : out.cluster.total_gpus();
  auto parsed = ParseLayout(out.layout_text, world, &out.job);
  if (!parsed.ok()) return Status::Error(path + ": " + pointer + "/layout/text: " + parsed.status().message());
  out.layout = std::move(parsed).value();
  return out;
}

}  // namespace foldplan
