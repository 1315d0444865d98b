// The `foldplan.plan/v1` file written by `plan -o` and `explain -o`: the
// inputs it was made from (in their own file formats, overrides applied),
// the ranked candidates with their costs, and the best layout's rank map
// (foldplan.rankmap/v1). doc/formats.md documents every field; validate/
// reads these files.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/formats.h"
#include "core/status.h"
#include "costmodel/evaluate.h"
#include "inputs/cluster.h"
#include "inputs/job.h"
#include "inputs/model.h"
#include "planner/layout.h"
#include "planner/enumerate.h"

namespace foldplan {

// One candidate: layout, step_time_s, tokens_per_s, mfu, step (breakdown),
// memory (terms and peak_gib), comm (per kind total_s and exposed_s),
// violations (names, empty when legal).
nlohmann::ordered_json CandidateJson(const Evaluation& evaluation);

// The Megatron-LM arguments of `layout` (planner/rank_export.h's megatron
// export without its comment lines), one per entry, or why Megatron cannot
// express it.
Result<std::vector<std::string>> MegatronArguments(const Layout& layout, const ClusterSpec& cluster,
                                                   const ModelSpec* model, const JobSpec* job);

struct PlanFileContents {
  const CostModel* model = nullptr;
  std::string objective;               // "throughput", "memory", or "explain"
  std::vector<Evaluation> candidates;  // best first
  // Search counts; absent for explain.
  const Enumeration* enumeration = nullptr;
  // plan --recipe: the recipe's own layout and its rank among the fitting
  // layouts (1 = best); absent otherwise.
  const Evaluation* recipe = nullptr;
  uint64_t recipe_rank = 0;
};

// The whole file as JSON text. The first candidate's rank map is built and
// exported; an error there (e.g. an illegal explained layout) leaves the
// "rank_map" field null with "rank_map_error" saying why. Likewise its
// Megatron arguments ("megatron_args", else "megatron_error").
Result<std::string> PlanFileJson(const PlanFileContents& contents);

// A plan file read back (`foldplan compare`, `foldplan simulate --plan`):
// the inputs it was made from and one candidate's layout (the best, 0, by
// default).
struct PlanFileInputs {
  ClusterSpec cluster;      // /inputs/cluster/spec, named /inputs/cluster/name
  ModelSpec model;          // /inputs/model/spec
  JobSpec job;              // /inputs/job/spec
  std::string layout_text;  // /candidates/N/layout/text, as written
  Layout layout;            // that text parsed against the job (stage split filled)
};

// Reads `path` as foldplan.plan/v1 and parses its embedded inputs with the
// input readers (ParseCluster, ParseModel, ParseJob) and candidate number
// `number`'s layout with ParseLayout. Candidates are numbered from 1 (#1 the
// best, /candidates/0), as every table and flag numbers them (no such
// candidate: an error at /candidates). Errors name the file and the JSON
// pointer (of the plan for its own fields; of the embedded spec for the
// readers', "FILE /inputs/model/spec: /layers: ...").
Result<PlanFileInputs> LoadPlanFile(const std::string& path, int number = 1);

// A candidate number given on the command line (`flag`: "--candidate"):
// 1 or more, or a usage error saying candidates are numbered from 1.
Status CheckCandidateNumber(const std::string& flag, long long number);

}  // namespace foldplan
