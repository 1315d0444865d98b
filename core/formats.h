// The names of foldplan's file formats and the limits they share: one home
// for each, so that the writer of a format and every reader of it (foldplan,
// foldbench in validate/, `foldplan validate`) agree. Every JSON document
// foldplan writes or reads carries one of these in its "schema" field;
// doc/formats.md documents each format.
#pragma once

#include <cstdint>

namespace foldplan {

// Inputs (doc/formats.md).
inline constexpr const char* kClusterSchema = "foldplan.cluster/v1";
inline constexpr const char* kModelSchema = "foldplan.model/v1";
inline constexpr const char* kJobSchema = "foldplan.job/v1";
inline constexpr const char* kRecipeSchema = "foldplan.recipe/v1";  // a public run: cluster, model, job, layout
inline constexpr const char* kComputeProfileSchema = "foldplan.compute-profile/v1";
inline constexpr const char* kCalibrationSchema = "foldplan.calibration/v2";    // calibrate -o; also read
inline constexpr const char* kCalibrationSchemaV1 = "foldplan.calibration/v1";  // hand-written; still read

// Outputs.
inline constexpr const char* kPlanSchema = "foldplan.plan/v1";          // plan -o, explain -o
inline constexpr const char* kRankMapSchema = "foldplan.rankmap/v1";    // ranks, a plan's rank_map
inline constexpr const char* kEnumerationSchema = "foldplan.enumeration/v1";
inline constexpr const char* kTopologySchema = "foldplan.topology/v1";
inline constexpr const char* kListSchema = "foldplan.list/v1";
inline constexpr const char* kMeasurementsSchema = "foldplan.measurements/v1";  // foldbench -o
inline constexpr const char* kCalibrationReportSchema = "foldplan.calibration-report/v1";  // calibrate --json
inline constexpr const char* kCollectiveTableSchema = "foldplan.collective/v1";  // collective --json
inline constexpr const char* kComparisonSchema = "foldplan.comparison/v1";       // compare --json
inline constexpr const char* kSimulationSchema = "foldplan.simulation/v1";       // simulate --json
inline constexpr const char* kTraceSchema = "foldplan.trace/v1";  // simulate --trace (Chrome trace-event JSON, its otherData)
inline constexpr const char* kDiffSchema = "foldplan.diff/v1";                   // diff --json
inline constexpr const char* kWorldSizesSchema = "foldplan.world-sizes/v1";      // plan --gpus-range --json
inline constexpr const char* kExpertLoadsSchema = "foldplan.expert-loads/v1";  // simulate --imbalance FILE: a measured per-expert load histogram

// The largest world (ranks of a layout, GPUs of a cluster's topology) any
// format holds. It bounds the topology graph's memory (about 0.5 KB per
// GPU) and the rank arrays of a rank map, and keeps every rank, count and
// vertex index well inside int.
inline constexpr int64_t kMaxWorldSize = int64_t{1} << 20;

}  // namespace foldplan
