// `foldplan check`: every input file read and checked as the commands read
// it, nothing planned. One home for "is this file valid": the readers
// themselves (inputs/), the topology (topology/) and the layout syntax.
#include <string>

#include "cli/check_command.h"
#include "cli/output.h"
#include "core/formats.h"
#include "core/json_check.h"
#include "costmodel/comm_params.h"
#include "costmodel/compute_calibration.h"
#include "inputs/loader.h"
#include "inputs/measurements.h"
#include "inputs/recipe.h"
#include "planner/layout.h"
#include "sim/expert_loads.h"
#include "topology/topology.h"

namespace foldplan {
namespace {

// The file as the input its schema names; on success a one-line summary.
Result<std::string> CheckOne(const std::string& path) {
  auto json = ParseJsonFile(path);
  if (!json.ok()) return json.status();
  const nlohmann::json& doc = json.value();
  const auto schema_field = doc.is_object() ? doc.find("schema") : doc.end();
  const std::string schema =
      doc.is_object() && schema_field != doc.end() && schema_field->is_string() ? schema_field->get<std::string>() : "";
  if (schema == kClusterSchema) {
    auto cluster = ParseCluster(doc, path);
    if (!cluster.ok()) return cluster.status();
    auto topology = Topology::Build(cluster.value());
    if (!topology.ok()) return topology.status();
    return std::string(kClusterSchema) + ", " + std::to_string(cluster->total_gpus()) + " GPUs";
  }
  if (schema == kModelSchema) {
    auto model = ParseModel(doc, path);
    if (!model.ok()) return model.status();
    return std::string(kModelSchema) + ", " + std::to_string(model->layers) + " layers";
  }
  if (schema == kJobSchema) {
    auto job = ParseJob(doc, path);
    if (!job.ok()) return job.status();
    return std::string(kJobSchema);
  }
  if (schema == kRecipeSchema) {
    // The recipe with what it names, loaded as `--recipe` loads it.
    InputOptions options;
    options.recipe = path;
    auto inputs = LoadInputs(options);
    if (!inputs.ok()) return inputs.status();
    const Inputs& in = inputs.value();
    const int world = in.job.world_size > 0 ? in.job.world_size : in.cluster.total_gpus();
    auto layout = ParseLayout(in.recipe->layout, world, &in.job);
    if (!layout.ok()) return Status::Error(path + ": /layout: " + layout.status().message());
    return std::string(kRecipeSchema) + ", " + std::to_string(world) + " GPUs";
  }
  if (schema == kMeasurementsSchema) {
    auto m = ParseMeasurements(doc, path);
    if (!m.ok()) return m.status();
    return std::string(kMeasurementsSchema) + ", " + std::to_string(m->ops.size()) + " ops on " +
           std::to_string(m->ranks) + " ranks";
  }
  if (schema == kCalibrationSchema || schema == kCalibrationSchemaV1) {
    // As --calibration reads it, for the default cluster; the GPU is not
    // checked (no cluster is named), the compute section is.
    auto cluster = LoadCluster(kDefaultCluster);
    if (!cluster.ok()) return cluster.status();
    auto params = ParseCommParams(doc, path, cluster.value(), {.allow_other_gpu = true});
    if (!params.ok()) return params.status();
    if (const auto section = doc.find("compute"); section != doc.end()) {
      auto shipped = ComputeProfile::Load(ComputeProfile::DefaultPath());
      if (!shipped.ok()) return shipped.status();
      auto merged = CalibratedComputeProfile(shipped.value(), *section, path, cluster->gpu);
      if (!merged.ok()) return merged.status();
    }
    return schema + ", " + std::to_string(params->fits.size()) + " fits" +
           (params->calibrated_gpu.empty() ? "" : ", measured on " + params->calibrated_gpu);
  }
  if (schema == kExpertLoadsSchema) {
    auto loads = LoadExpertLoadsFile(path);
    if (!loads.ok()) return loads.status();
    return std::string(kExpertLoadsSchema) + ", " + std::to_string(loads->histogram.size()) + " experts";
  }
  return Status::Error(path + ": /schema: expected one of \"" + kClusterSchema + "\", \"" + kModelSchema +
                       "\", \"" + kJobSchema + "\", \"" + kRecipeSchema + "\", \"" + kMeasurementsSchema +
                       "\", \"" + kCalibrationSchema + "\", \"" + kCalibrationSchemaV1 + "\", \"" +
                       kExpertLoadsSchema + "\", found " +
                       (schema_field == doc.end() || !doc.is_object() ? std::string("no schema")
                                                                      : DescribeJsonValue(*schema_field)));
}

}  // namespace

int RunCheck(const CheckOptions& options, std::ostream& out, std::ostream& err) {
  int code = 0;
  for (const std::string& file : options.files) {
    auto summary = CheckOne(file);
    if (!summary.ok()) {
      code = Fail(err, summary.status());
      continue;
    }
    out << file << ": valid " << summary.value() << "\n";
  }
  return code;
}

}  // namespace foldplan
