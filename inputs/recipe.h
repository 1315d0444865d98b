// A public training recipe that ran, as read from a `foldplan.recipe/v1`
// file (doc/formats.md#recipe): where it comes from, the cluster and the
// GPUs it used, the model, the job (a base job plus the recipe's settings)
// and the layout text Megatron's flags give. Loading a recipe resolves and
// loads the cluster, model and base job it names, so a loaded recipe is
// everything `explain` and `plan` need.
//
// The layout stays text: parsing it needs the planner (planner/layout.h),
// which inputs/ must not depend on. ParseLayout(recipe.layout,
// recipe.job.world_size, &recipe.job) reads it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "inputs/cluster.h"
#include "inputs/job.h"
#include "inputs/loader.h"
#include "inputs/model.h"

namespace foldplan {

// What a recipe relies on that foldplan does not model; a recipe that uses
// one may not fit in memory or match its step time in foldplan's estimate,
// so tests and reports can set it aside.
enum class RecipeFeature {
  kActivationOffloading,  // --fine-grained-activation-offloading (activations to host memory)
};
inline constexpr int kRecipeFeatureCount = 1;
const char* Name(RecipeFeature f);  // "activation_offloading"

struct RecipeSpec {
  std::string name;         // file stem, e.g. "qwen3-235b-h100-tp2-pp8-vpp4-ep32"
  std::string source;       // file it came from
  std::string description;  // what the source states and what was inferred
  std::string citation;     // the file's "source": where the recipe is published

  // As written in the file.
  std::string cluster_name;  // shipped name or path
  int gpus = 0;              // GPUs used (the world size)
  int gpus_per_domain = 0;   // GPUs used of every NVLink domain; 0: all
  std::string model_name;
  std::string job_base;      // base job, shipped name or path ("default")
  std::string job_base_source;  // the base job's file, resolved (what job_base stands for)
  nlohmann::json job_settings = nlohmann::json::object();  // the job fields the recipe sets
  std::string layout;        // layout text (planner/layout.h syntax)
  std::vector<std::string> notes;
  std::vector<RecipeFeature> not_modelled;
  // Layout keys whose values the source does not state and the recipe
  // infers (its description says how), e.g. "recompute", "etp".
  std::vector<std::string> inferred;

  // Resolved. The cluster is the whole file (not yet cut to gpus_per_domain:
  // the job carries that, as a job file would, and the caller applies it
  // with UsingGpusPerDomain). The job is the base job with job_settings
  // applied, world_size = gpus and gpus_per_domain set; its name is the
  // recipe's.
  ClusterSpec cluster;
  ModelSpec model;
  JobSpec job;

  bool Uses(RecipeFeature f) const;
  // Whether every feature the recipe depends on is modelled.
  bool fully_modelled() const { return not_modelled.empty(); }
};

// By shipped name (data/recipes/NAME.json) or path. Cluster, model and job
// names inside resolve as on the command line; a path inside is relative
// to the recipe file's folder.
Result<RecipeSpec> LoadRecipe(const std::string& name_or_path);
// The same from parsed JSON; `file` names the source in error messages and
// anchors relative paths inside.
Result<RecipeSpec> ParseRecipe(const nlohmann::json& json, const std::string& file);

}  // namespace foldplan
