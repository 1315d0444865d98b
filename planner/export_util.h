// Helpers shared by the rank-map exporters (planner/export_*.cc). Internal:
// not part of the public export interface (planner/rank_export.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
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

// `text` as comment lines of at most about `width` characters, each starting
// with `comment` and a space, broken at spaces (a longer word stays whole).
std::string CommentLines(const std::string& text, const std::string& comment, int width = 100);

// torch.distributed.pipelining's schedule class name, as torchtitan's
// pipeline_parallel_schedule and OLMo-core take it ("GPipe", "1F1B",
// "Interleaved1F1B", "DualPipeV"), or null for a schedule it has none for:
// ZB-H1 (its zero-bubble schedules run several stages per rank).
const char* TorchPipelineSchedule(PipelineSchedule schedule);
// Why `trainer` cannot run `schedule` when TorchPipelineSchedule has no
// name for it, listing the ones it has.
std::string NoTorchScheduleReason(PipelineSchedule schedule, const std::string& trainer);

// One mesh realising both views of the folding (JAX, MaxText): rank
// digits cut at every stride of both views. Axes are listed slowest first
// (row-major: the mesh element at flat index i is rank i); each axis is a
// run of consecutive rank digits lying inside one dense axis and one expert
// axis, so every dense and expert degree is a product of mesh axes.
enum class DenseAxis { kPp, kDp, kCp, kTp };
enum class ExpertAxis { kPp, kEdp, kEp, kEtp };
struct FoldedMeshAxis {
  std::string name;  // "pp", else "<dense>_<expert>": "tp_etp", "cp_ep", "dp_edp", ...
  int size = 1;
  int stride = 1;  // rank stride of the axis' first digit
  DenseAxis dense = DenseAxis::kPp;
  ExpertAxis expert = ExpertAxis::kPp;
};
// Refuses, naming the two strides that do not nest, when the dense digits
// (tp, cp, dp, pp) and expert digits (etp, ep, edp, pp) of a rank cut it at
// strides that do not divide one another: then some degree of one view is
// no product of mesh axes.
Result<std::vector<FoldedMeshAxis>> BuildFoldedMesh(const Layout& layout);

// Empty when, for every group kind listed, the groups of a row-major mesh of
// `shape` along the axes marked in `varying[kind]` equal the map's;
// otherwise DescribeGroupMismatch's sentence for the first kind that differs.
std::string MeshGroupMismatch(const RankMap& map, const std::vector<int>& shape,
                              const std::vector<std::pair<GroupKind, std::vector<bool>>>& varying,
                              const std::string& their_name);

// The ICI x DCN split of a row-major mesh (slowest axis first) as
// jax.experimental.mesh_utils.create_hybrid_device_mesh builds it: the
// granules (NVLink domains holding ranks) in order, each holding the same
// number of consecutive ranks, rank order equal to GPU order inside each,
// and the granule's ranks a product of the mesh's innermost axes (at most
// one axis split, its ICI part inner). ici[k] * dcn[k] == shape[k].
struct IciDcnSplit {
  std::vector<int> ici, dcn;
  int granule_ranks = 0;  // ranks per NVLink domain used
  int granules = 1;
  bool domain_is_node = true;  // a domain's ranks share a node: granule = process (process_is_granule)
};
// The error says which condition fails (for MaxText a refusal; for the jax
// export a reason to build the mesh from the rank order instead). Checks
// the placement's device order, derives granule_ranks and granules from the
// map, then calls SplitIciDcnOf, so that both give the same split.
Result<IciDcnSplit> SplitIciDcn(const RankMap& map, const std::vector<int>& shape);
// The layout-only half of SplitIciDcn: the split of `shape` (slowest axis
// first) when `granules` granules hold `granule_ranks` consecutive ranks
// each, the ICI part the product of the innermost axes (at most one axis
// split, its ICI part inner). Refuses when granule_ranks x granules is not
// the mesh's size or granule_ranks is no such product. domain_is_node is
// left true (the map's half decides it).
Result<IciDcnSplit> SplitIciDcnOf(const std::vector<int>& shape, int granule_ranks, int granules);

// MaxText's mesh axes as the maxtext export sets them, slowest first.
enum MaxTextAxis { kMaxTextData, kMaxTextStage, kMaxTextFsdp, kMaxTextContext, kMaxTextTensor, kMaxTextExpert };
inline constexpr int kMaxTextAxisCount = 6;
// The sizes of those six axes (data, stage, fsdp, context, tensor, expert)
// for `layout`, from the layout alone: stage pp, context cp, tensor tp,
// expert ep, and dp / ep on fsdp or data. Which of the two: with pp > 1 and
// dp / ep > 1 the one the order's groups need (data is outside stage, fsdp
// inside: data when the order puts dp after pp, else fsdp); otherwise fsdp
// for a layout with fsdp, else data. Empty when ep does not divide dp (no
// MaxText mesh: its expert axis is a batch axis of the dense layers).
std::vector<int> MaxTextMeshShape(const Layout& layout);

}  // namespace foldplan::export_util
