// Exporting a rank map for trainers (doc/trainers.md):
//   rankmap     foldplan.rankmap/v1 JSON: every group, both views, placement
//   megatron    Megatron-LM command-line arguments
//   torch       a Python snippet building torch DeviceMeshes from the real rank arrays
//   torchtitan  a Python module returning torchtitan's Trainer.Config (after 2026-02-23)
//   olmo-core   a Python snippet building OLMo-core's parallelism configs
//   jax         a Python snippet building one jax.sharding.Mesh and PartitionSpecs
//   maxtext     MaxText ici_*/dcn_*_parallelism YAML settings
//   torchtitan-toml  torchtitan [parallelism] TOML settings (the releases with TOML configs)
// A trainer that cannot express the layout gets a refusal: a Status error
// whose message says why. Before any export the map's invariants are checked
// (CheckRankMapInvariants); a violation is a bug and is reported as an error.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "inputs/cluster.h"
#include "inputs/job.h"
#include "inputs/model.h"
#include "planner/rank_map.h"

namespace foldplan {

enum class ExportFormat { kRankMap, kMegatron, kTorch, kTorchtitan, kOlmoCore, kJax, kMaxText, kTorchtitanToml };
inline constexpr int kExportFormatCount = 8;

// "rankmap", "megatron", "torch", "torchtitan", "olmo-core", "jax", "maxtext",
// "torchtitan-toml"
const char* Name(ExportFormat format);
// Accepts the names above; the error lists them.
Result<ExportFormat> ParseExportFormat(std::string_view text);

// What an export may mention besides the map. Any pointer may be null:
// cluster (possibly a generic one) for the placement's header, model for
// experts and layer counts, job for sequence length, global batch and the
// token dispatcher.
struct ExportContext {
  const ClusterSpec* cluster = nullptr;
  const ModelSpec* model = nullptr;
  const JobSpec* job = nullptr;
  // Top-level fields the exporting command adds to the rankmap JSON (ranks
  // with a model: whether the layout fits, costmodel/layout_verdict.h).
  const nlohmann::ordered_json* extra_fields = nullptr;
};

Result<std::string> ExportRankMap(const RankMap& map, ExportFormat format, const ExportContext& ctx);

// The invariants a rank map satisfies, one sentence each, in the order
// CheckRankMapInvariants checks them (also written to the rankmap JSON).
const std::vector<std::string>& RankMapInvariants();
// Checks every invariant; the error names the first one broken and where.
Status CheckRankMapInvariants(const RankMap& map);

// The individual exporters (ExportRankMap dispatches to them after the
// invariant check).
Result<std::string> ExportRankMapJson(const RankMap& map, const ExportContext& ctx);
Result<std::string> ExportMegatron(const RankMap& map, const ExportContext& ctx);
// The arguments ExportMegatron prints, one flag with its value per entry
// ("--tensor-model-parallel-size 2"), or its refusal. Checks no invariant.
Result<std::vector<std::string>> MegatronArgs(const RankMap& map, const ExportContext& ctx);
Result<std::string> ExportTorch(const RankMap& map, const ExportContext& ctx);
Result<std::string> ExportTorchtitan(const RankMap& map, const ExportContext& ctx);
Result<std::string> ExportTorchtitanToml(const RankMap& map, const ExportContext& ctx);
Result<std::string> ExportOlmoCore(const RankMap& map, const ExportContext& ctx);
Result<std::string> ExportJax(const RankMap& map, const ExportContext& ctx);
Result<std::string> ExportMaxText(const RankMap& map, const ExportContext& ctx);

}  // namespace foldplan
