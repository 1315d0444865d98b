// Loading clusters, models and jobs (and recipes, inputs/recipe.h) by
// shipped name or by path, with every field checked (core/json_check.h). A name without '/' and without a
// ".json" suffix is looked up in the shipped data directory.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/formats.h"  // the schema names each file is checked against
#include "core/status.h"
#include "inputs/cluster.h"
#include "inputs/job.h"
#include "inputs/model.h"

namespace foldplan {

// kRecipe: a public training run that names a cluster, a model and a job
// (inputs/recipe.h has LoadRecipe); shipped in data/recipes/.
enum class InputKind { kCluster, kModel, kJob, kRecipe };
const char* Name(InputKind kind);  // "cluster", "model", "job", "recipe"

// The shipped data directory: $FOLDPLAN_DATA_DIR if set, else the source
// tree's data/ (compiled in), else <executable>/../share/foldplan/data.
std::string DataDir();

struct ShippedInput {
  InputKind kind;
  std::string name;         // file stem, e.g. "h100-dgx-16n"
  std::string path;
  std::string description;  // the file's "description" field
};
// Every shipped input of `kind`, sorted by name.
Result<std::vector<ShippedInput>> ListShipped(InputKind kind);

// Resolves a shipped name or a path to a file path; an unknown name's
// error lists the shipped names.
Result<std::string> ResolveInput(InputKind kind, const std::string& name_or_path);

Result<ClusterSpec> LoadCluster(const std::string& name_or_path);
Result<ModelSpec> LoadModel(const std::string& name_or_path);
Result<JobSpec> LoadJob(const std::string& name_or_path);

// The same from parsed JSON; `file` names the source in error messages.
Result<ClusterSpec> ParseCluster(const nlohmann::json& json, const std::string& file);
Result<ModelSpec> ParseModel(const nlohmann::json& json, const std::string& file);
Result<JobSpec> ParseJob(const nlohmann::json& json, const std::string& file);

// Shipped defaults used when a command is not given --cluster/--model/--job.
inline constexpr const char* kDefaultCluster = "h100-dgx-16n";
inline constexpr const char* kDefaultModel = "mixtral-8x22b";
inline constexpr const char* kDefaultJob = "default";

}  // namespace foldplan
