// The pipeline description: which schedule a layout runs and what each of
// its pp x vpp virtual stages holds (decoder layers, MoE among them, MTP
// layers, the embedding, the output layer and loss) and which pipeline rank
// runs it. The one home of the rules every part of foldplan uses:
//  - a layout's decoder layers per virtual stage are its stage_layers when
//    they cover the model (pp x vpp entries summing to its layers), else
//    ChooseStageLayers below, else, for a layout whose layers cannot fill
//    its stages (illegal anyway), an even spread, so that its costs still
//    mean something next to the violation;
//  - virtual stage c (model order) runs on pipeline rank PipelineRankOf
//    (schedule, pp, c) as its model chunk c / pp, and holds the next
//    stage_layers[c] layers: rank c % pp (Megatron's order) under every
//    schedule but DualPipeV, whose second chunk runs back up the ranks (the
//    V: rank 0 holds the first and the last stage);
//  - the embedding is on virtual stage 0; the output layer and loss on the
//    last one; MTP layers where the layout's pp_layout puts them (its m),
//    else on the last stage before the loss (Megatron's default).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "inputs/model.h"
#include "planner/layout.h"
#include "inputs/pipeline_schedule.h"

namespace foldplan {

// The pipeline rank that runs virtual stage c (0 <= c < pp x vpp, model
// order) under `schedule`: c % pp, except under DualPipeV, where the chunks
// alternate direction (c % pp on even chunks c / pp, pp - 1 - c % pp on odd
// ones: with its two chunks the V, stages 0..2pp-1 on ranks 0..pp-1, pp-1..0).
// Every consumer of "which rank holds stage c" asks this.
int PipelineRankOf(PipelineSchedule schedule, int pp, int c);

struct VirtualStage {
  int index = 0;          // c, in model order (Megatron's)
  int pipeline_rank = 0;  // PipelineRankOf(schedule, pp, c)
  int chunk = 0;          // c / pp: the model chunk it is on its rank
  int first_layer = 0;    // its first decoder layer (0-based)
  int layers = 0;         // decoder layers
  int moe_layers = 0;     // of which MoE
  int mtp_layers = 0;     // MTP layers (after every decoder layer, before the loss)
  bool embedding = false; // holds the input embedding (c == 0)
  bool loss = false;      // holds the output layer and loss (the last c)
  int dense_layers() const { return layers - moe_layers; }
};

// What one pipeline rank holds: the sum of its virtual stages.
struct PipelineRank {
  int layers = 0;
  int moe_layers = 0;
  int mtp_layers = 0;
  bool embedding = false;
  bool loss = false;
  int dense_layers() const { return layers - moe_layers; }
  bool operator==(const PipelineRank&) const = default;
};

struct PipelineDescription {
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int pp = 1;
  int vpp = 1;
  std::vector<VirtualStage> stages;  // pp x vpp, in Megatron's order
  std::vector<PipelineRank> ranks;   // pp

  // Decoder layers per virtual stage (a Layout's stage_layers).
  std::vector<int> StageLayers() const;
  // MTP layers per virtual stage.
  std::vector<int> StageMtp() const;
  // Megatron's --pipeline-model-parallel-layout for this pipeline
  // ("Et|(tt|)*30mL"), canonical (planner/pipeline_layout.h).
  std::string LayoutText() const;
  // Stage boundaries a micro-batch crosses each way between two pipeline
  // ranks: pp x vpp - 1 (pp > 1), DualPipeV's 2 pp - 2 (its turn at rank
  // pp - 1 stays on the rank).
  int boundaries() const;
};

// The schedule a layout runs: layout.schedule_or_default(), the one it
// names, else interleaved 1F1B when vpp > 1, else 1F1B.
PipelineSchedule ScheduleOf(const Layout& layout);

// Relative cost of one block of each kind, forward and backward of one
// micro-batch, in any unit (the cost model gives seconds: CostModel::
// pipeline_weights()). The defaults weigh decoder layers alike and the rest
// nothing, which balances layer counts only.
struct BlockWeights {
  double dense_layer = 1;
  double moe_layer = 1;
  double embedding = 0;
  double loss = 0;       // the output layer and loss
  double mtp_layer = 0;  // one MTP module (its layer, projection, output head and loss)
};

// `*weights`, or the defaults when null.
const BlockWeights& WeightsOrDefault(const BlockWeights* weights);

// Where the layers go when a layout does not say. Layers that divide over
// pp x vpp: evenly (Megatron's default). Otherwise the best legal layout:
// the one whose heaviest pipeline rank (the stages `schedule` puts on it,
// PipelineRankOf; unset: DefaultSchedule(vpp)), counting embedding, loss
// and the model's MTP layers by `weights`, is lightest, among Megatron's
// first/last split (pipeline_split.h) and a greedy balance of every rank
// (each virtual stage holds at least one layer, but the first may hold only
// the embedding and the last only the loss); the first/last split wins
// ties. Error when the layers cannot fill the stages.
Result<std::vector<int>> ChooseStageLayers(const ModelSpec& model, int pp, int vpp, const BlockWeights& weights,
                                           std::optional<PipelineSchedule> schedule = std::nullopt);
// Whether layers over pp x vpp need a chosen layout (do not divide evenly).
bool NeedsChosenLayout(int layers, int pp, int vpp);

// Checks explicit stage contents against a model: pp x vpp stages, its
// decoder layers, and (when `stage_mtp` is given) its MTP layers. The error
// says which count is off.
Status CheckStages(const std::vector<int>& stage_layers, const std::vector<int>& stage_mtp,
                   const ModelSpec& model, int pp, int vpp);

// The layout's pipeline on `model` by the rules above. pp and vpp below 1
// count as 1. `weights` decide layers the layout does not give (null: the
// defaults).
PipelineDescription DescribePipeline(const Layout& layout, const ModelSpec& model,
                                     const BlockWeights* weights = nullptr);

}  // namespace foldplan
