// The input specs back to JSON, in their file formats, so that a plan file
// can carry the exact inputs it was made from (overrides applied) and be
// read back with ParseCluster / ParseModel / ParseJob.
#pragma once

#include <nlohmann/json.hpp>

#include "inputs/cluster.h"
#include "inputs/job.h"
#include "inputs/model.h"

namespace foldplan {

nlohmann::json ToJson(const ClusterSpec& cluster);
nlohmann::json ToJson(const ModelSpec& model);
nlohmann::json ToJson(const JobSpec& job);

}  // namespace foldplan
