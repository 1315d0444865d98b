// The rank map of a layout: every rank's coordinates in both views, its
// physical place, and every process group, listed exactly as Megatron-Core's
// RankGenerator lists them for a Megatron order string (doc/folding.md section 3).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "inputs/cluster.h"
#include "inputs/model.h"
#include "planner/layout.h"

namespace foldplan {

// Group kinds, in export order. Dense view: tp cp dp dp_cp tp_cp tp_dp
// tp_dp_cp mp(tp-pp) pp embedding position_embedding; expert view: ep etp
// tp_ep tp_ep_pp edp.
enum class GroupKind {
  kTp, kCp, kDp, kDpCp, kTpCp, kTpDp, kTpDpCp, kMp, kPp, kEmbedding, kPositionEmbedding,
  kEp, kEtp, kTpEp, kTpEpPp, kEdp,
};
inline constexpr int kGroupKindCount = 16;
const char* Name(GroupKind kind);  // "tp", "dp_cp", "tp_ep_pp", ...
std::optional<GroupKind> GroupKindNamed(std::string_view name);  // the kind of that Name, or nullopt
// The kinds whose all-to-all / tensor traffic should stay inside an NVLink domain.
bool IsHeavy(GroupKind kind);      // tp, cp, tp_cp, ep, etp, tp_ep

using Groups = std::vector<std::vector<int>>;

struct RankCoords {
  int pp = 0, dp = 0, cp = 0, tp = 0;    // dense view
  int edp = 0, ep = 0, etp = 0;          // expert view (pp shared)
};

struct PhysicalPlace {
  int gpu = 0;        // global GPU index in the cluster
  int node = 0;
  int local_gpu = 0;
  int domain = 0;     // NVLink domain
  int rail = 0;
};

// A heavy group whose ranks sit in more than one NVLink domain.
struct Straddle {
  GroupKind kind;
  int group_index;                // index into groups(kind)
  std::vector<int> ranks_per_domain;  // nonzero counts, in domain order
};

// What of the model the rank map needs: Megatron's embedding group
// (pretrain_gpt.py's embedding ranks, read at d98e8a64 ~493-505) is [first,
// last] of each pipeline group for tied embeddings (Megatron's default) and
// [first] plus the pipeline ranks holding MTP layers for untied ones
// (--untie-embeddings-and-output-weights). The defaults are a tied model
// without MTP: Megatron's default embedding ranks.
struct RankMapOptions {
  bool untied_embeddings = false;  // the model's output layer is its own weight
  int mtp_layers = 0;  // the model's MTP layers: on the stages the layout's stage_mtp gives, else the last
};
// The options for `model` (null: the defaults).
RankMapOptions RankMapOptionsFor(const ModelSpec* model);
// The pipeline stages (pp coordinates, increasing, distinct) of the
// embedding group of every pp group: {0} when pp == 1; tied {0, pp - 1};
// untied {0} and the pipeline rank (PipelineRankOf) of each virtual stage
// holding MTP layers (the layout's stage_mtp when it has pp x vpp entries
// summing to mtp_layers, else the last virtual stage when mtp_layers > 0).
std::vector<int> EmbeddingStages(const Layout& layout, const RankMapOptions& options);

class RankMap {
 public:
  int world() const { return static_cast<int>(coords_.size()); }
  const Layout& layout() const { return layout_; }
  const RankMapOptions& options() const { return options_; }
  const RankCoords& coords(int rank) const { return coords_[rank]; }
  const PhysicalPlace& place(int rank) const { return places_[rank]; }
  const Groups& groups(GroupKind kind) const { return groups_[static_cast<int>(kind)]; }
  // Flat rank arrays in row-major order of shapes [pp, dp, cp, tp] and
  // [pp, edp, ep, etp]: element (p, d, c, t) is the rank with those coordinates.
  const std::vector<int>& dense_view() const { return dense_view_; }
  const std::vector<int>& expert_view() const { return expert_view_; }
  // Heavy groups spanning more than one NVLink domain.
  std::vector<Straddle> Straddles() const;
  // GPUs of the cluster left idle by the placement.
  int idle_gpus() const { return idle_gpus_; }

 private:
  friend Result<RankMap> BuildRankMap(const Layout&, const ClusterSpec&, const RankMapOptions&);
  Layout layout_;
  RankMapOptions options_;
  std::vector<RankCoords> coords_;
  std::vector<PhysicalPlace> places_;
  std::array<Groups, kGroupKindCount> groups_;
  std::vector<int> dense_view_;
  std::vector<int> expert_view_;
  int idle_gpus_ = 0;
};

// world == pp*tp*cp*dp == pp*etp*ep*edp and every degree >= 1; the error
// shows the products.
Status CheckLayoutDegrees(const Layout& layout);

// Builds the map. Errors (not asserts) for a layout whose degrees do not
// multiply out, an order string Megatron would refuse, or a placement that
// does not fit the cluster. Legality against a model is planner/legality.h's job.
// `options` decide the embedding groups (EmbeddingStages); without them the
// map has Megatron's default (tied) ones.
Result<RankMap> BuildRankMap(const Layout& layout, const ClusterSpec& cluster,
                             const RankMapOptions& options = {});

}  // namespace foldplan
