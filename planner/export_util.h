// Helpers shared by the rank-map exporters (planner/export_*.cc). Internal:
// not part of the public export interface (planner/rank_export.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "inputs/pipeline_schedule.h"
#include "planner/rank_generator.h"
#include "planner/rank_map.h"

namespace foldplan::export_util {

// "[0, 1, 2]"
std::string RankList(const std::vector<int>& ranks);
// "[[0, 1], [2, 3]]"
std::string GroupList(const Groups& groups);
// Ranks as Python/JSON list text wrapped at about `width` characters per
// line, continuation lines indented by `indent` spaces.
std::string WrappedRankList(const std::vector<int>& ranks, int indent, int width = 100);

// The groups of a mesh whose element at row-major flat index i is rank i
// (last dim fastest, as torch DeviceMesh and torchtitan/OLMo-core build
// them), along the dims with varying[k] true.
Groups RowMajorMeshGroups(const std::vector<int>& shape, const std::vector<bool>& varying);

// Empty when `ours` and `theirs` hold the same groups (as sets of sets);
// otherwise a sentence naming `kind` and the first group that differs
// ("dp groups differ: this layout has [0, 8], torchtitan has [0, 4]").
std::string DescribeGroupMismatch(const std::string& kind, const Groups& ours, const Groups& theirs,
                                  const std::string& their_name);

// JSON text with objects indented by two spaces and every array of scalars
// on one line (so each group of a group list sits on its own line).
std::string PrettyJson(const nlohmann::ordered_json& value);

// Comment lines (each starting with `comment`) saying that the layout's
// packed placement must be applied by the launcher; empty for linear.
std::string PlacementNote(const RankMap& map, const std::string& comment);

// torch.distributed.pipelining's schedule class name, as torchtitan's
// pipeline_parallel_schedule and OLMo-core take it ("GPipe", "1F1B",
// "Interleaved1F1B", "DualPipeV"), or null for a schedule it has none for:
// ZB-H1 (its zero-bubble schedules run several stages per rank).
const char* TorchPipelineSchedule(PipelineSchedule schedule);
// Why `trainer` cannot run `schedule` when TorchPipelineSchedule has no
// name for it, listing the ones it has.
std::string NoTorchScheduleReason(PipelineSchedule schedule, const std::string& trainer);

}  // namespace foldplan::export_util
